package apnsmock_test

// Teams against the real mock: two teams on one mock see only their own records, faults, devices
// and clock; a deleted team's tokens are refused; a team that is not there is a 404.

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apnsmock "github.com/apns-mock/apns-mock/clients/go"
)

// teamPusher pushes as one team's provider: a connection of its own (a connection is bound to
// the key of its first token) and one token signed with the team's key.
type teamPusher struct {
	client *http.Client
	bearer string
	topic  string
}

func newTeamPusher(t *testing.T, team *apnsmock.TestTeam) *teamPusher {
	t.Helper()
	client, err := http2Client()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseIdleConnections)
	bearer, err := providerToken(team.Key, team.KeyID, team.TeamID)
	if err != nil {
		t.Fatal(err)
	}
	return &teamPusher{client: client, bearer: bearer, topic: team.Topic()}
}

func (p *teamPusher) push(t *testing.T, token, title string) apnsResponse {
	t.Helper()
	return pushWith(t, p.client, p.bearer, p.topic, token, alert(title, ""), nil)
}

// newTestTeam makes a team that is deleted when the test ends.
func newTestTeam(t *testing.T, ctx context.Context, mock *apnsmock.Client, apps ...string) *apnsmock.TestTeam {
	t.Helper()
	team, err := mock.NewTestTeam(ctx, apps...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := team.Close(); err != nil {
			t.Errorf("deleting team %s: %v", team.TeamID, err)
		}
	})
	return team
}

var appleID = regexp.MustCompile(`^[A-Z0-9]{10}$`)

func TestNewTestTeamAndTeams(t *testing.T) {
	mock, ctx := setUp(t)
	a := newTestTeam(t, ctx, mock)
	b := newTestTeam(t, ctx, mock, "com.example.teams.b", "com.example.teams.b.widget")

	for _, team := range []*apnsmock.TestTeam{a, b} {
		if !appleID.MatchString(team.TeamID) || !appleID.MatchString(team.KeyID) || team.TeamID == team.KeyID {
			t.Errorf("team %s, key %s: want two IDs of 10 uppercase letters and digits", team.TeamID, team.KeyID)
		}
		if team.Admin.Team() != team.TeamID || mock.Team() != "" {
			t.Errorf("admin scoped to %q, the mock's client to %q", team.Admin.Team(), mock.Team())
		}
		block, _ := pem.Decode([]byte(team.KeyPEM))
		if block == nil || block.Type != "PRIVATE KEY" {
			t.Fatalf("key PEM %q", team.KeyPEM)
		}
		if parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes); err != nil || !team.Key.Equal(parsed) {
			t.Errorf("the PEM holds %v (%v), not the team's key", parsed, err)
		}
		v := team.View
		if v.TeamID != team.TeamID || v.Source != "api" || len(v.Keys) != 1 || v.Keys[0].KeyID != team.KeyID ||
			v.Keys[0].Environment != "any" || v.Keys[0].PEM != "" || v.Devices.Count != 0 || v.Devices.Policy != "" {
			t.Errorf("created %+v", v)
		}
	}
	if a.TeamID == b.TeamID || a.KeyID == b.KeyID {
		t.Errorf("two teams with the same IDs: %s/%s, %s/%s", a.TeamID, a.KeyID, b.TeamID, b.KeyID)
	}
	if want := "com.example.t" + strings.ToLower(a.TeamID); len(a.Apps) != 1 || a.Topic() != want || strings.Join(a.View.Apps, ",") != want {
		t.Errorf("default apps %v (listed %v), want [%s]", a.Apps, a.View.Apps, want)
	}
	if strings.Join(b.View.Apps, ",") != "com.example.teams.b,com.example.teams.b.widget" || b.Topic() != "com.example.teams.b" {
		t.Errorf("apps %v (listed %v)", b.Apps, b.View.Apps)
	}

	teams, err := mock.Teams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, team := range teams {
		ids = append(ids, team.TeamID+":"+team.Source)
	}
	// The configuration's team first, then those added, in the order of addition.
	if len(teams) < 3 || ids[0] != env.teamID+":configuration" || ids[len(ids)-2] != a.TeamID+":api" || ids[len(ids)-1] != b.TeamID+":api" {
		t.Errorf("teams %v, want %s:configuration first and %s, %s last", ids, env.teamID, a.TeamID, b.TeamID)
	}
	// A scoped client lists every team too: /v1/teams is not scoped.
	if scoped, err := a.Admin.Teams(ctx); err != nil || len(scoped) != len(teams) {
		t.Errorf("teams through a scoped client: %d, %v; want %d", len(scoped), err, len(teams))
	}
}

// TestTeamsAreIsolated: a push signed with team A's key is in A's records and not in B's; a fault
// of B does not touch A's pushes; devices, clock, stats, events and reset are the team's own.
func TestTeamsAreIsolated(t *testing.T) {
	mock, ctx := setUp(t)
	a, b := newTestTeam(t, ctx, mock), newTestTeam(t, ctx, mock)
	pushA, pushB := newTeamPusher(t, a), newTeamPusher(t, b)

	events, err := a.Admin.Events(ctx, apnsmock.Query{Outcome: apnsmock.OutcomeAll}, apnsmock.EventOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()

	// B's fault matches every alert: B's pushes fail, A's do not.
	rule, err := b.Admin.AddFault(ctx, map[string]any{
		"match": map[string]any{"pushType": "alert"}, "respond": map[string]any{"reason": "BadDeviceToken"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if rules, err := b.Admin.Faults(ctx); err != nil || len(rules) != 1 || rules[0].ID != rule.ID {
		t.Errorf("B's faults %+v, %v", rules, err)
	}
	if rules, err := a.Admin.Faults(ctx); err != nil || len(rules) != 0 {
		t.Errorf("A's faults %+v, %v; want none", rules, err)
	}

	token := newToken(t)
	answerA := pushA.push(t, token, "from A")
	if answerA.Status != 200 || answerA.APNSID == "" {
		t.Fatalf("A's push: %+v, want 200 (B's fault must not apply)", answerA)
	}
	if answer := pushB.push(t, token, "from B"); answer.Status != 400 || answer.Reason != "BadDeviceToken" {
		t.Fatalf("B's push: %+v, want B's fault's 400 BadDeviceToken", answer)
	}

	records, err := a.Admin.WaitFor(ctx, apnsmock.Query{Token: token}, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := records[0]; r.APNSID != answerA.APNSID || r.Auth.TeamID != a.TeamID || r.Auth.KeyID != a.KeyID || r.Topic != a.Topic() || r.Injected {
		t.Errorf("A's record %+v (auth %+v)", r, r.Auth)
	}
	// Every outcome: A sees its one push, B its one refused push, never A's.
	page, err := a.Admin.Notifications(ctx, apnsmock.Query{Outcome: apnsmock.OutcomeAll})
	if err != nil || len(page.Notifications) != 1 || page.Notifications[0].APNSID != answerA.APNSID {
		t.Errorf("A's records %+v, %v; want its one push", page.Notifications, err)
	}
	page, err = b.Admin.Notifications(ctx, apnsmock.Query{Outcome: apnsmock.OutcomeAll})
	if err != nil || len(page.Notifications) != 1 || page.Notifications[0].Auth.TeamID != b.TeamID ||
		page.Notifications[0].Reason != "BadDeviceToken" || !page.Notifications[0].Injected {
		t.Errorf("B's records %+v, %v; want its one refused push", page.Notifications, err)
	}
	if page, err := b.Admin.Notifications(ctx, apnsmock.Query{APNSID: answerA.APNSID, Outcome: apnsmock.OutcomeAll}); err != nil || len(page.Notifications) != 0 {
		t.Errorf("A's push in B's records: %+v, %v", page.Notifications, err)
	}
	// Unscoped: the whole mock's records, both teams'.
	if page, err := mock.Notifications(ctx, apnsmock.Query{Token: token, Outcome: apnsmock.OutcomeAll}); err != nil || len(page.Notifications) != 2 {
		t.Errorf("unscoped records %+v, %v; want both pushes", page.Notifications, err)
	}

	// A's event stream carried A's push only.
	event, err := events.Next()
	if err != nil {
		t.Fatal(err)
	}
	if r, err := event.Record(); err != nil || r.APNSID != answerA.APNSID {
		t.Errorf("A's first event %+v: %+v, %v; want A's push", event, r, err)
	}

	// Stats: each team's own counts.
	stats, err := a.Admin.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if stats["team"] != a.TeamID || stats["accepted"] != 1.0 || stats["rejected"] != 0.0 {
		t.Errorf("A's stats %v", stats)
	}
	if stats, err := b.Admin.Stats(ctx); err != nil || stats["team"] != b.TeamID || stats["accepted"] != 0.0 || stats["rejected"] != 1.0 {
		t.Errorf("B's stats %v, %v", stats, err)
	}

	// Metrics scoped to A: A's request counters, not B's.
	metrics, err := a.Admin.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(metrics, `apns_team_requests_total{team="`+a.TeamID+`"`) || strings.Contains(metrics, b.TeamID) {
		t.Errorf("A's metrics lack A's series or hold B's:\n%s", metrics)
	}

	// Devices: a device A unregisters is gone for A's pushes only.
	gone := newToken(t)
	if _, err := a.Admin.UnregisterDevice(ctx, gone, apnsmock.Unregistration{}); err != nil {
		t.Fatal(err)
	}
	if list, err := a.Admin.Devices(ctx); err != nil || len(list.Devices) != 1 || list.Devices[0].Token != gone {
		t.Errorf("A's devices %+v, %v", list, err)
	}
	if list, err := mock.Devices(ctx); err != nil || len(list.Devices) != 0 {
		t.Errorf("the global devices %+v, %v; want none", list, err)
	}
	if answer := pushA.push(t, gone, "to a gone device"); answer.Status != 410 || answer.Reason != "Unregistered" {
		t.Errorf("A's push to its unregistered device: %+v, want 410 Unregistered", answer)
	}
	if err := b.Admin.ClearFaults(ctx); err != nil {
		t.Fatal(err)
	}
	if answer := pushB.push(t, gone, "B does not know it"); answer.Status != 200 {
		t.Errorf("B's push to the device A unregistered: %+v, want 200", answer)
	}

	// The clock: A's runs ahead, B's and the mock's do not.
	clock, err := a.Admin.AdvanceClock(ctx, 120)
	if err != nil {
		t.Fatal(err)
	}
	if clock.OffsetSeconds != 120 || clock.TeamOffsetSeconds != 120 {
		t.Errorf("A's clock %+v, want 120 s ahead, all of it A's", clock)
	}
	if clock, err := b.Admin.Clock(ctx); err != nil || clock.OffsetSeconds != 0 {
		t.Errorf("B's clock %+v, %v", clock, err)
	}
	if clock, err := mock.Clock(ctx); err != nil || clock.OffsetSeconds != 0 {
		t.Errorf("the mock's clock %+v, %v", clock, err)
	}

	// Reset scoped to A: A's records, devices and clock only.
	if err := a.Admin.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	if page, err := a.Admin.Notifications(ctx, apnsmock.Query{Outcome: apnsmock.OutcomeAll}); err != nil || len(page.Notifications) != 0 {
		t.Errorf("A's records after its reset: %+v, %v", page.Notifications, err)
	}
	if list, err := a.Admin.Devices(ctx); err != nil || len(list.Devices) != 0 {
		t.Errorf("A's devices after its reset: %+v, %v", list, err)
	}
	if clock, err := a.Admin.Clock(ctx); err != nil || clock.OffsetSeconds != 0 || clock.TeamOffsetSeconds != 0 {
		t.Errorf("A's clock after its reset: %+v, %v", clock, err)
	}
	if page, err := b.Admin.Notifications(ctx, apnsmock.Query{Outcome: apnsmock.OutcomeAll}); err != nil || len(page.Notifications) != 2 {
		t.Errorf("B's records after A's reset: %+v, %v; want its 2", page.Notifications, err)
	}
}

// TestDeletedTeam: deleting a team refuses its tokens, on its open connection and a new one,
// with 403 InvalidProviderToken, and its scoped calls are 404s.
func TestDeletedTeam(t *testing.T) {
	mock, ctx := setUp(t)
	a := newTestTeam(t, ctx, mock)
	pushA := newTeamPusher(t, a)
	token := newToken(t)
	if answer := pushA.push(t, token, "before"); answer.Status != 200 {
		t.Fatalf("push: %+v", answer)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if answer := pushA.push(t, token, "after, same connection"); answer.Status != 403 || answer.Reason != "InvalidProviderToken" {
		t.Errorf("push on the open connection after the delete: %+v, want 403 InvalidProviderToken", answer)
	}
	if answer := newTeamPusher(t, a).push(t, token, "after, new connection"); answer.Status != 403 || answer.Reason != "InvalidProviderToken" {
		t.Errorf("push on a new connection after the delete: %+v, want 403 InvalidProviderToken", answer)
	}

	teams, err := mock.Teams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, team := range teams {
		if team.TeamID == a.TeamID {
			t.Errorf("deleted team %s still listed", a.TeamID)
		}
	}
	_, err = a.Admin.Notifications(ctx, apnsmock.Query{})
	if e := apiError(t, err, 404); !strings.HasPrefix(e.Message, "team: "+a.TeamID+" is not a team of this mock") {
		t.Errorf("message %q", e.Message)
	}
	apiError(t, mock.DeleteTeam(ctx, a.TeamID), 404)
	// Its records are gone from every view: the push before the delete is no longer there; the two
	// refused after it are, as any refused token's, attributed to no team.
	page, err := mock.Notifications(ctx, apnsmock.Query{Token: token, Outcome: apnsmock.OutcomeAll})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Notifications) != 2 {
		t.Errorf("records of the token, unscoped: %d, want the 2 refused after the delete", len(page.Notifications))
	}
	for _, r := range page.Notifications {
		if r.Status != 403 || r.Auth.TeamID == a.TeamID {
			t.Errorf("record #%d: %d %s of team %q: the deleted team's push is still seen", r.Seq, r.Status, r.Reason, r.Auth.TeamID)
		}
	}
}

func TestTeamErrors(t *testing.T) {
	mock, ctx := setUp(t)

	// An unknown team: 404, named, through every kind of call.
	unknown := mock.ForTeam("XYZ0000001")
	_, err := unknown.Notifications(ctx, apnsmock.Query{})
	if e := apiError(t, err, 404); e.Message != "team: XYZ0000001 is not a team of this mock (GET /v1/teams lists them)" {
		t.Errorf("message %q", e.Message)
	}
	_, err = unknown.AddFault(ctx, map[string]any{"respond": map[string]any{"reason": "BadDeviceToken"}})
	apiError(t, err, 404)
	_, err = unknown.Stats(ctx)
	apiError(t, err, 404)
	_, err = unknown.Events(ctx, apnsmock.Query{}, apnsmock.EventOptions{})
	apiError(t, err, 404)
	_, err = unknown.WaitFor(ctx, apnsmock.Query{}, 1, time.Second)
	apiError(t, err, 404)
	// A malformed one: 400 naming team.
	_, err = mock.ForTeam("lowercase1").Stats(ctx)
	if e := apiError(t, err, 400); !strings.HasPrefix(e.Message, "team") {
		t.Errorf("message %q", e.Message)
	}
	// WithTeam is ForTeam at construction.
	_, err = apnsmock.NewClient(env.adminURL, apnsmock.WithTeam("XYZ0000001")).Clock(ctx)
	apiError(t, err, 404)

	key, err := apnsmock.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	teamID := apnsmock.NewTeamID()
	good := apnsmock.Team{TeamID: teamID, Apps: []string{"com.example.errors"},
		Keys: []apnsmock.TeamKey{{KeyID: key.KeyID, PEM: key.PrivateKeyPEM}}}
	for _, c := range []struct {
		team   apnsmock.Team
		prefix string
	}{
		{apnsmock.Team{TeamID: teamID}, "apps:"},
		{apnsmock.Team{TeamID: "short", Apps: good.Apps}, "teamId:"},
		{apnsmock.Team{TeamID: teamID, Apps: good.Apps, Keys: []apnsmock.TeamKey{{KeyID: key.KeyID, PEM: "not a key"}}}, "keys[0].pem:"},
	} {
		_, err := mock.CreateTeam(ctx, c.team)
		if e := apiError(t, err, 400); !strings.HasPrefix(e.Message, c.prefix) {
			t.Errorf("%+v: message %q, want %s...", c.team, e.Message, c.prefix)
		}
	}
	// A private .p8 serves as well as the public key.
	view, err := mock.CreateTeam(ctx, good)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mock.DeleteTeam(context.Background(), teamID) })
	if view.TeamID != teamID || view.Source != "api" || len(view.Keys) != 1 || view.Keys[0].KeyID != key.KeyID {
		t.Errorf("created %+v", view)
	}
	other, err := apnsmock.NewSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	for name, team := range map[string]apnsmock.Team{
		"the team ID taken": {TeamID: teamID, Apps: []string{"com.example.errors.two"}},
		"the key ID taken":  {TeamID: apnsmock.NewTeamID(), Apps: []string{"com.example.errors.three"}, Keys: []apnsmock.TeamKey{{KeyID: key.KeyID, PEM: other.PublicKeyPEM}}},
		"an app of another": {TeamID: apnsmock.NewTeamID(), Apps: []string{env.topic}},
	} {
		if _, err := mock.CreateTeam(ctx, team); err == nil {
			t.Errorf("%s: created", name)
		} else {
			apiError(t, err, 409)
		}
	}
	// The configuration's team can be reset, not deleted; an unknown team cannot be deleted.
	apiError(t, mock.DeleteTeam(ctx, env.teamID), 409)
	apiError(t, mock.DeleteTeam(ctx, "XYZ0000001"), 404)
}

// TestTeamsInParallel is the use teams are for: tests running at once on one mock, each with a
// team of its own, each seeing exactly its own pushes.
func TestTeamsInParallel(t *testing.T) {
	mock, ctx := setUp(t)
	token := newToken(t) // the same device for every worker: the records must still be apart
	var mu sync.Mutex
	seen := map[string]string{}
	t.Run("workers", func(t *testing.T) {
		for _, name := range []string{"one", "two", "three", "four"} {
			name := name
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				team := newTestTeam(t, ctx, mock)
				pusher := newTeamPusher(t, team)
				for i := 0; i < 3; i++ {
					if answer := pusher.push(t, token, name); answer.Status != 200 {
						t.Fatalf("push %d: %+v", i, answer)
					}
				}
				records, err := team.Admin.WaitFor(ctx, apnsmock.Query{}, 3, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				page, err := team.Admin.Notifications(ctx, apnsmock.Query{Outcome: apnsmock.OutcomeAll})
				if err != nil || len(page.Notifications) != 3 {
					t.Fatalf("records %+v, %v; want exactly its 3", page.Notifications, err)
				}
				for _, r := range records {
					title, _ := r.PayloadMap()["aps"].(map[string]any)["alert"].(map[string]any)["title"].(string)
					if r.Auth.TeamID != team.TeamID || title != name {
						t.Errorf("record of team %s titled %q in %s's records", r.Auth.TeamID, title, name)
					}
				}
				mu.Lock()
				seen[team.TeamID] = name
				mu.Unlock()
			})
		}
	})
	if len(seen) != 4 {
		t.Errorf("teams %v, want 4 of their own", seen)
	}
}

// TestTeamRequestsOnTheWire checks against a stand-in server what the client sends: the header of
// a scoped client (on every call, the event stream's too), the team body of NewTestTeam (a public
// key, never the private one), and Close's DELETE, a 404 taken as done.
func TestTeamRequestsOnTheWire(t *testing.T) {
	var mu sync.Mutex
	headers := map[string]string{}
	var created map[string]any
	deletes := 0
	record := func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		headers[r.Method+" "+r.URL.Path] = r.Header.Get("APNS-Mock-Team")
	}
	server := newStandIn(t, map[string]http.HandlerFunc{
		"/v1/stats": func(w http.ResponseWriter, r *http.Request) {
			record(r)
			io.WriteString(w, `{"team":"`+r.Header.Get("APNS-Mock-Team")+`"}`)
		},
		"/v1/events": func(w http.ResponseWriter, r *http.Request) {
			record(r)
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, ": subscribed\n\n")
		},
		"/v1/teams": func(w http.ResponseWriter, r *http.Request) {
			record(r)
			if r.Method == http.MethodGet {
				io.WriteString(w, `{"teams":[{"teamId":"DEMOTEAM01","apps":["com.example.app"],"keys":[{"keyId":"DEMOKEY001","environment":"any","topics":[],"relatedKeyId":null}],"devices":{"policy":null,"count":0},"source":"configuration"}]}`)
				return
			}
			if err := json.NewDecoder(r.Body).Decode(&created); err != nil {
				http.Error(w, `{"error":"body"}`, 400)
				return
			}
			w.WriteHeader(201)
			io.WriteString(w, `{"teamId":"`+created["teamId"].(string)+`","apps":["com.example.wire"],"keys":[],"devices":{"policy":"registered","count":2},"source":"api"}`)
		},
		"/v1/teams/": func(w http.ResponseWriter, r *http.Request) {
			record(r)
			mu.Lock()
			deletes++
			mu.Unlock()
			w.WriteHeader(404)
			io.WriteString(w, `{"error":"team: gone"}`)
		},
	})
	ctx := context.Background()
	mock := apnsmock.NewClient(server, apnsmock.WithToken("s3cret"))
	team, err := mock.NewTestTeam(ctx, "com.example.wire")
	if err != nil {
		t.Fatal(err)
	}
	if team.View.Devices.Policy != "registered" || team.View.Devices.Count != 2 || team.View.Source != "api" {
		t.Errorf("view %+v", team.View)
	}
	keys, _ := created["keys"].([]any)
	key, _ := keys[0].(map[string]any)
	if created["teamId"] != team.TeamID || len(keys) != 1 || key["keyId"] != team.KeyID || key["environment"] != "any" ||
		!strings.HasPrefix(key["pem"].(string), "-----BEGIN PUBLIC KEY-----\n") || created["devices"] != nil {
		t.Errorf("POST /v1/teams body %v", created)
	}
	if apps, _ := created["apps"].([]any); len(apps) != 1 || apps[0] != "com.example.wire" {
		t.Errorf("apps %v", created["apps"])
	}

	if stats, err := team.Admin.Stats(ctx); err != nil || stats["team"] != team.TeamID {
		t.Errorf("scoped stats %v, %v", stats, err)
	}
	stream, err := team.Admin.Events(ctx, apnsmock.Query{}, apnsmock.EventOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stream.Close()
	if stats, err := mock.Stats(ctx); err != nil || stats["team"] != "" {
		t.Errorf("unscoped stats %v, %v: the header was sent", stats, err)
	}
	teams, err := team.Admin.Teams(ctx)
	if err != nil || len(teams) != 1 || teams[0].Devices.Policy != "" || teams[0].Keys[0].RelatedKeyID != "" || teams[0].Source != "configuration" {
		t.Errorf("teams %+v, %v", teams, err)
	}
	if err := team.Close(); err != nil || team.Close() != nil {
		t.Errorf("Close after a 404: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if headers["GET /v1/events"] != team.TeamID || headers["DELETE /v1/teams/"+team.TeamID] != "" || headers["POST /v1/teams"] != "" || deletes != 1 {
		t.Errorf("headers %v, %d deletes", headers, deletes)
	}
}
