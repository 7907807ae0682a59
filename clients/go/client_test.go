package apnsmock_test

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	apnsmock "github.com/apns-mock/apns-mock/clients/go"
)

// setUp returns a client of the mock, reset, and a context that bounds the test.
func setUp(t *testing.T) (*apnsmock.Client, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	mock := apnsmock.NewClient(env.adminURL)
	if err := mock.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	return mock, ctx
}

// apiError returns err as *apnsmock.Error, failing the test when it is not one with this status.
func apiError(t *testing.T, err error, status int) *apnsmock.Error {
	t.Helper()
	var e *apnsmock.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *apnsmock.Error", err, err)
	}
	if e.Status != status {
		t.Fatalf("status %d (%v), want %d", e.Status, e, status)
	}
	return e
}

func TestHealth(t *testing.T) {
	mock, ctx := setUp(t)
	health, err := mock.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if health.Status != "ok" || strconv.Itoa(health.Ports.APNS) != env.apnsPort ||
		strconv.Itoa(health.Ports.Admin) != env.adminPort || strconv.Itoa(health.Ports.BroadcastSandbox) != env.channelsPort {
		t.Errorf("health %+v, want ok with apns=%s admin=%s broadcastSandbox=%s", health, env.apnsPort, env.adminPort, env.channelsPort)
	}
}

func TestNotificationsFiltersAndPages(t *testing.T) {
	mock, ctx := setUp(t)
	token, other := newToken(t), newToken(t)
	first := sendAlert(t, token, "one", "1")
	sendAlert(t, token, "two", "2")
	push(t, token, alert("three", "3"), map[string]string{"apns-collapse-id": "scores"})
	sendAlert(t, other, "four", "4")

	page, err := mock.Notifications(ctx, apnsmock.Query{Token: strings.ToUpper(token)})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Notifications) != 3 || page.More {
		t.Fatalf("page %+v, want 3 records and no more", page)
	}
	r := page.Notifications[0]
	if r.Token != token || r.Topic != env.topic || r.PushType != "alert" || r.Status != 200 || r.Kind != "device" ||
		r.APNSID != first.APNSID || r.Environment != "sandbox" || r.PayloadEncoding != "json" || !r.ResponseWritten ||
		r.Priority == nil || *r.Priority != 10 || r.Reason != "" || r.Action != "" || r.Injected || r.ConnectionID == 0 {
		t.Errorf("record %+v", r)
	}
	if r.Auth.Method != "token" || r.Auth.TeamID != env.teamID || r.Auth.KeyID != env.keyID || r.Auth.IATForm != "integer" ||
		r.Auth.SignatureForm != "jose" || r.Auth.TokenID == "" || r.Auth.IAT == nil {
		t.Errorf("auth %+v", r.Auth)
	}
	if r.Headers["apns-topic"] != env.topic || r.Headers[":method"] != "POST" || r.Headers["authorization"] != "" {
		t.Errorf("headers %v", r.Headers)
	}
	aps, _ := r.PayloadMap()["aps"].(map[string]any)
	if title := aps["alert"].(map[string]any)["title"]; title != "one" {
		t.Errorf("payload %s: title %v", r.Payload, title)
	}

	// One page at a time: two records, then the rest after Next.
	page, err = mock.Notifications(ctx, apnsmock.Query{Token: token, Limit: 2})
	if err != nil || len(page.Notifications) != 2 || !page.More {
		t.Fatalf("page %+v, %v; want 2 records and more", page, err)
	}
	page, err = mock.Notifications(ctx, apnsmock.Query{Token: token, Since: apnsmock.Ptr(page.Next)})
	if err != nil || len(page.Notifications) != 1 || page.More || page.Notifications[0].CollapseID != "scores" {
		t.Fatalf("page %+v, %v; want the third record and no more", page, err)
	}

	for _, c := range []struct {
		query apnsmock.Query
		want  int
	}{
		{apnsmock.Query{APNSID: strings.ToLower(first.APNSID)}, 1},
		{apnsmock.Query{CollapseID: "scores"}, 1},
		{apnsmock.Query{Topic: env.topic, PushType: "alert", Kind: "device", Outcome: apnsmock.OutcomeAccepted}, 4},
		{apnsmock.Query{Outcome: apnsmock.OutcomeRejected}, 0},
		{apnsmock.Query{Outcome: apnsmock.OutcomeAll, Limit: 3}, 3},
		{apnsmock.Query{Kind: "broadcast"}, 0},
		{apnsmock.Query{ChannelID: "bm9uZQ=="}, 0},
	} {
		page, err := mock.Notifications(ctx, c.query)
		if err != nil || len(page.Notifications) != c.want {
			t.Errorf("%+v: %d records, %v; want %d", c.query, len(page.Notifications), err, c.want)
		}
	}
}

func TestDeleteNotifications(t *testing.T) {
	mock, ctx := setUp(t)
	sendAlert(t, newToken(t), "gone", "soon")
	if err := mock.DeleteNotifications(ctx); err != nil {
		t.Fatal(err)
	}
	page, err := mock.Notifications(ctx, apnsmock.Query{Outcome: apnsmock.OutcomeAll})
	if err != nil || len(page.Notifications) != 0 {
		t.Fatalf("after delete: %+v, %v", page, err)
	}
}

func TestWaitFor(t *testing.T) {
	mock, ctx := setUp(t)
	token := newToken(t)
	type result struct {
		records []apnsmock.Record
		err     error
	}
	done := make(chan result, 1)
	go func() {
		records, err := mock.WaitFor(ctx, apnsmock.Query{Token: token}, 2, 10*time.Second)
		done <- result{records, err}
	}()
	time.Sleep(200 * time.Millisecond) // the wait is in place before the pushes (it would also see earlier ones)
	sendAlert(t, token, "a", "1")
	sendAlert(t, newToken(t), "not this one", "")
	sendAlert(t, token, "b", "2")
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if len(got.records) != 2 || got.records[0].Token != token || got.records[1].Token != token {
		t.Fatalf("records %+v", got.records)
	}
}

func TestWaitTimeout(t *testing.T) {
	mock, ctx := setUp(t)
	token := newToken(t)
	sendAlert(t, token, "only", "one")
	started := time.Now()
	records, err := mock.WaitFor(ctx, apnsmock.Query{Token: token}, 2, time.Second)
	elapsed := time.Since(started)
	var timeout *apnsmock.WaitTimeoutError
	if !errors.As(err, &timeout) {
		t.Fatalf("records %v, error %v (%T), want *WaitTimeoutError", records, err, err)
	}
	if timeout.Matched != 1 || timeout.Expected != 2 || len(timeout.Records) != 1 || timeout.Records[0].Token != token {
		t.Errorf("timeout %+v", timeout)
	}
	message := timeout.Error()
	for _, want := range []string{"1 of 2 matched", "#" + strconv.FormatUint(timeout.Records[0].Seq, 10) + " 200", token, env.topic} {
		if !strings.Contains(message, want) {
			t.Errorf("message %q lacks %q", message, want)
		}
	}
	if elapsed < 900*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("the wait took %v, want about 1 s", elapsed)
	}
}

func TestErrors(t *testing.T) {
	mock, ctx := setUp(t)
	_, err := mock.AdvanceClock(ctx, -1)
	e := apiError(t, err, 400)
	if !strings.HasPrefix(e.Message, "advanceSeconds:") || !strings.Contains(err.Error(), e.Message) {
		t.Errorf("message %q, error text %q", e.Message, err)
	}
	_, err = mock.Notifications(ctx, apnsmock.Query{Outcome: "sometimes"})
	if e := apiError(t, err, 400); !strings.HasPrefix(e.Message, "outcome:") {
		t.Errorf("message %q", e.Message)
	}
	_, err = mock.WaitFor(ctx, apnsmock.Query{}, 0, time.Second)
	if e := apiError(t, err, 400); !strings.HasPrefix(e.Message, "count:") {
		t.Errorf("message %q", e.Message)
	}
	_, err = mock.AddFault(ctx, map[string]any{"respond": map[string]any{"reason": "NoSuchReason"}})
	if e := apiError(t, err, 400); !strings.HasPrefix(e.Message, "respond.reason:") {
		t.Errorf("message %q", e.Message)
	}
}

func TestFaults(t *testing.T) {
	mock, ctx := setUp(t)
	token := newToken(t)
	rule, err := mock.AddFault(ctx, map[string]any{
		"match": map[string]any{"token": token}, "respond": map[string]any{"reason": "BadDeviceToken"}, "times": 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rule.ID == "" || rule.Match.Token != token || rule.Respond == nil || rule.Respond.Status != 400 ||
		rule.Times == nil || *rule.Times != 1 || rule.Remaining == nil || *rule.Remaining != 1 {
		t.Errorf("rule %+v", rule)
	}
	if rules, err := mock.Faults(ctx); err != nil || len(rules) != 1 || rules[0].ID != rule.ID {
		t.Fatalf("faults %+v, %v", rules, err)
	}

	if answer := push(t, token, alert("t", "b"), nil); answer.Status != 400 || answer.Reason != "BadDeviceToken" {
		t.Fatalf("push: %+v, want 400 BadDeviceToken", answer)
	}
	records, err := mock.WaitFor(ctx, apnsmock.Query{Token: token, Outcome: apnsmock.OutcomeRejected}, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := records[0]; r.Status != 400 || r.Reason != "BadDeviceToken" || !r.Injected {
		t.Errorf("record %+v", r)
	}
	page, err := mock.Notifications(ctx, apnsmock.Query{Reason: "BadDeviceToken"})
	if err != nil || len(page.Notifications) != 1 {
		t.Errorf("reason filter: %+v, %v", page, err)
	}
	sendAlert(t, token, "once", "only") // times: 1 is used up
	if rules, err := mock.Faults(ctx); err != nil || len(rules) != 0 {
		t.Fatalf("faults after use: %+v, %v", rules, err)
	}

	// A list: all or none; a FaultRule with the rule's fields serves as well as a map.
	added, err := mock.AddFaults(ctx, []any{
		map[string]any{"match": map[string]any{"topic": env.topic}, "delayMs": 10},
		apnsmock.FaultRule{Match: apnsmock.FaultMatch{Token: token}, Respond: &apnsmock.FaultResponse{Reason: "Unregistered"}, Times: apnsmock.Ptr(2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(added) != 2 || added[0].DelayMs != 10 || added[1].Respond == nil || added[1].Respond.Status != 410 {
		t.Fatalf("added %+v", added)
	}
	if err := mock.RemoveFault(ctx, added[0].ID); err != nil {
		t.Fatal(err)
	}
	apiError(t, mock.RemoveFault(ctx, added[0].ID), 404)
	if rules, err := mock.Faults(ctx); err != nil || len(rules) != 1 || rules[0].ID != added[1].ID {
		t.Fatalf("faults %+v, %v", rules, err)
	}
	if err := mock.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if rules, err := mock.Faults(ctx); err != nil || len(rules) != 0 {
		t.Fatalf("faults after clear: %+v, %v", rules, err)
	}
}

func TestDevices(t *testing.T) {
	mock, ctx := setUp(t)
	token := newToken(t)
	device, err := mock.RegisterDevice(ctx, apnsmock.Device{Token: token, Topic: env.topic, Environment: "sandbox"})
	if err != nil {
		t.Fatal(err)
	}
	if device.Token != token || device.Topic != env.topic || device.UnregisteredAt != "" {
		t.Errorf("registered %+v", device)
	}
	list, err := mock.Devices(ctx)
	if err != nil || list.Policy != "open" || len(list.Devices) != 1 || list.Devices[0].Token != token {
		t.Fatalf("devices %+v, %v", list, err)
	}
	sendAlert(t, token, "still", "valid")

	device, err = mock.UnregisterDevice(ctx, token, apnsmock.Unregistration{})
	if err != nil {
		t.Fatal(err)
	}
	if device.Reason != "Unregistered" || device.Timestamp == nil || device.UnregisteredAt == "" {
		t.Errorf("unregistered %+v", device)
	}
	if answer := push(t, token, alert("t", "b"), nil); answer.Status != 410 || answer.Reason != "Unregistered" ||
		answer.Timestamp == nil || *answer.Timestamp != *device.Timestamp {
		t.Fatalf("push: %+v, want 410 Unregistered at %d", answer, *device.Timestamp)
	}
	records, err := mock.WaitFor(ctx, apnsmock.Query{Token: token, Reason: "Unregistered"}, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := records[0]; r.Status != 410 || r.Timestamp == nil || *r.Timestamp != *device.Timestamp || r.Injected {
		t.Errorf("record %+v", r)
	}

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	device, err = mock.UnregisterDevice(ctx, token, apnsmock.Unregistration{Timestamp: at, Reason: "ExpiredToken"})
	if err != nil {
		t.Fatal(err)
	}
	if device.Reason != "ExpiredToken" || device.Timestamp == nil || *device.Timestamp != at.UnixMilli() {
		t.Errorf("expired %+v", device)
	}
	if answer := push(t, token, alert("t", "b"), nil); answer.Status != 410 || answer.Reason != "ExpiredToken" {
		t.Fatalf("push: %+v, want 410 ExpiredToken", answer)
	}

	if err := mock.RemoveDevice(ctx, token); err != nil {
		t.Fatal(err)
	}
	sendAlert(t, token, "open policy", "valid again")
	apiError(t, mock.RemoveDevice(ctx, token), 404)
	_, err = mock.RegisterDevice(ctx, apnsmock.Device{Token: "not hex"})
	if e := apiError(t, err, 400); !strings.HasPrefix(e.Message, "token:") {
		t.Errorf("message %q", e.Message)
	}
}

func TestChannels(t *testing.T) {
	mock, ctx := setUp(t)
	generated, err := mock.CreateChannel(ctx, apnsmock.Channel{BundleID: env.topic})
	if err != nil {
		t.Fatal(err)
	}
	if generated.ChannelID == "" || generated.Environment != "sandbox" || generated.MessageStoragePolicy == nil || *generated.MessageStoragePolicy != 1 {
		t.Errorf("created %+v", generated)
	}
	// An ID with "/" and "+", which the path must percent-encode.
	id := base64.StdEncoding.EncodeToString([]byte{0xfb, 0xff, 0xbf, 0x01, 0x02, 0x03})
	if !strings.Contains(id, "/") || !strings.Contains(id, "+") {
		t.Fatalf("id %s", id)
	}
	named, err := mock.CreateChannel(ctx, apnsmock.Channel{BundleID: env.topic, Environment: "production", ChannelID: id, MessageStoragePolicy: apnsmock.Ptr(0)})
	if err != nil {
		t.Fatal(err)
	}
	if named.ChannelID != id || named.Environment != "production" || *named.MessageStoragePolicy != 0 {
		t.Errorf("created %+v", named)
	}
	_, err = mock.CreateChannel(ctx, apnsmock.Channel{BundleID: env.topic, ChannelID: id})
	apiError(t, err, 409)

	for _, c := range []struct {
		query apnsmock.ChannelQuery
		want  []string
	}{
		{apnsmock.ChannelQuery{}, []string{generated.ChannelID, id}},
		{apnsmock.ChannelQuery{BundleID: env.topic, Environment: "production"}, []string{id}},
		{apnsmock.ChannelQuery{BundleID: "com.example.other"}, nil},
	} {
		channels, err := mock.Channels(ctx, c.query)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, ch := range channels {
			ids = append(ids, ch.ChannelID)
		}
		if len(ids) != len(c.want) || (len(ids) > 0 && !contains(ids, c.want...)) {
			t.Errorf("%+v: %v, want %v", c.query, ids, c.want)
		}
	}
	if err := mock.DeleteChannel(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := mock.DeleteChannel(ctx, generated.ChannelID); err != nil {
		t.Fatal(err)
	}
	apiError(t, mock.DeleteChannel(ctx, id), 404)
	if channels, err := mock.Channels(ctx, apnsmock.ChannelQuery{}); err != nil || len(channels) != 0 {
		t.Fatalf("after delete: %+v, %v", channels, err)
	}
	_, err = mock.Channels(ctx, apnsmock.ChannelQuery{Environment: "staging"})
	if e := apiError(t, err, 400); !strings.HasPrefix(e.Message, "environment:") {
		t.Errorf("message %q", e.Message)
	}
}

func contains(list []string, items ...string) bool {
	for _, item := range items {
		found := false
		for _, s := range list {
			found = found || s == item
		}
		if !found {
			return false
		}
	}
	return true
}

func TestEvents(t *testing.T) {
	mock, ctx := setUp(t)
	token := newToken(t)
	stream, err := mock.Events(ctx, apnsmock.Query{Token: token}, apnsmock.EventOptions{MaxRate: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	answer := sendAlert(t, token, "live", "event")
	event, err := stream.Next()
	if err != nil {
		t.Fatal(err)
	}
	record, err := event.Record()
	if err != nil {
		t.Fatal(err)
	}
	if event.Type != "message" || event.ID != strconv.FormatUint(record.Seq, 10) || record.Token != token || record.APNSID != answer.APNSID {
		t.Errorf("event %+v, record %+v", event, record)
	}
	stream.Close()
	if _, err := stream.Next(); err != io.EOF {
		t.Errorf("Next after Close: %v, want io.EOF", err)
	}

	// Replay from a seq, every outcome, and end after Limit records; Last-Event-ID wins over Since.
	push(t, token, map[string]any{}, map[string]string{"apns-push-type": "nonsense"})
	sendAlert(t, token, "third", "")
	replay, err := mock.Events(ctx, apnsmock.Query{Token: token, Outcome: apnsmock.OutcomeAll, Since: apnsmock.Ptr[uint64](0), Limit: 2},
		apnsmock.EventOptions{LastEventID: event.ID})
	if err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	var statuses []int
	for {
		event, err := replay.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		r, err := event.Record()
		if err != nil || r.Seq <= record.Seq {
			t.Fatalf("event %+v: %+v, %v", event, r, err)
		}
		statuses = append(statuses, r.Status)
	}
	if len(statuses) != 2 || statuses[0] != 400 || statuses[1] != 200 {
		t.Errorf("replayed statuses %v, want [400 200]", statuses)
	}

	_, err = mock.Events(ctx, apnsmock.Query{}, apnsmock.EventOptions{MaxRate: -1})
	if e := apiError(t, err, 400); !strings.HasPrefix(e.Message, "maxRate:") {
		t.Errorf("message %q", e.Message)
	}
}

func TestClock(t *testing.T) {
	mock, ctx := setUp(t)
	clock, err := mock.Clock(ctx)
	if err != nil || clock.OffsetSeconds != 0 || clock.Now == "" {
		t.Fatalf("clock %+v, %v", clock, err)
	}
	clock, err = mock.AdvanceClock(ctx, 3601)
	if err != nil {
		t.Fatal(err)
	}
	now, err1 := time.Parse(time.RFC3339, clock.Now)
	wall, err2 := time.Parse(time.RFC3339, clock.WallClock)
	if clock.OffsetSeconds != 3601 || err1 != nil || err2 != nil || now.Sub(wall) != 3601*time.Second {
		t.Errorf("advanced %+v (%v, %v)", clock, err1, err2)
	}
	if clock, err := mock.Clock(ctx); err != nil || clock.OffsetSeconds != 3601 {
		t.Errorf("clock %+v, %v", clock, err)
	}
	if err := mock.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if clock, err := mock.Clock(ctx); err != nil || clock.OffsetSeconds != 0 {
		t.Errorf("after reset %+v, %v", clock, err)
	}
}

func TestStatsReasonsCAAndMetrics(t *testing.T) {
	mock, ctx := setUp(t)
	sendAlert(t, newToken(t), "counted", "")
	stats, err := mock.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recording, _ := stats["recording"].(map[string]any)
	if stats["accepted"].(float64) < 1 || recording["records"] != 1.0 {
		t.Errorf("stats %v", stats)
	}

	reasons, err := mock.Reasons(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range reasons {
		found = found || (r.Reason == "BadDeviceToken" && r.Status == 400 && r.Explanation != "")
	}
	if !found {
		t.Errorf("reasons %+v lack BadDeviceToken 400", reasons)
	}

	caPEM, err := mock.CAPEM(ctx)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode([]byte(caPEM))
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("ca.pem %q", caPEM)
	}
	if ca, err := x509.ParseCertificate(block.Bytes); err != nil || !ca.IsCA {
		t.Errorf("ca %v, %v", ca, err)
	}

	metrics, err := mock.Metrics(ctx)
	if err != nil || !strings.Contains(metrics, "apns_requests_total") {
		t.Errorf("metrics %q, %v", metrics, err)
	}
}

// TestClientOptions checks the token, the timeouts, a health check answering 503 and errors
// without JSON, against a stand-in server.
func TestClientOptions(t *testing.T) {
	server := newStandIn(t, map[string]http.HandlerFunc{
		"/v1/clock": func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer s3cret" {
				w.WriteHeader(401)
				io.WriteString(w, `{"error":"authorization: a bearer token is required"}`)
				return
			}
			io.WriteString(w, `{"offsetSeconds":5,"now":"","wallClock":""}`)
		},
		"/v1/stats": func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(600 * time.Millisecond)
		},
		"/v1/health": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(503)
			io.WriteString(w, `{"status":"stopping","ports":{"apns":2197}}`)
		},
		"/v1/notifications/wait": func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(400 * time.Millisecond) // longer than the client's timeout, within the wait's
			io.WriteString(w, `{"notifications":[{"seq":1,"status":200}],"next":1,"more":false}`)
		},
		"/v1/reset": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(502)
			io.WriteString(w, "Bad Gateway\n")
		},
	})
	ctx := context.Background()
	mock := apnsmock.NewClient(server+"/", apnsmock.WithToken("s3cret"), apnsmock.WithTimeout(200*time.Millisecond),
		apnsmock.WithHTTPClient(&http.Client{}))

	if clock, err := mock.Clock(ctx); err != nil || clock.OffsetSeconds != 5 {
		t.Errorf("with the token: %+v, %v", clock, err)
	}
	_, err := apnsmock.NewClient(server).Clock(ctx)
	if e := apiError(t, err, 401); e.Message != "authorization: a bearer token is required" || e.Method != "GET" || e.Path != "/v1/clock" {
		t.Errorf("error %+v", e)
	}
	started := time.Now()
	if _, err := mock.Stats(ctx); !errors.Is(err, context.DeadlineExceeded) || time.Since(started) > 500*time.Millisecond {
		t.Errorf("slow answer: %v after %v, want a deadline exceeded after 200 ms", err, time.Since(started))
	}
	if records, err := mock.WaitFor(ctx, apnsmock.Query{}, 1, 300*time.Millisecond); err != nil || len(records) != 1 {
		t.Errorf("wait: %v, %v", records, err)
	}
	if e := apiError(t, mock.Reset(ctx), 502); e.Message != "Bad Gateway" {
		t.Errorf("message %q", e.Message)
	}
	_, err = mock.Health(ctx)
	if e := apiError(t, err, 503); !strings.Contains(e.Message, `"status":"stopping"`) {
		t.Errorf("message %q", e.Message)
	}
}
