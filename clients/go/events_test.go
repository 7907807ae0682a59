package apnsmock_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	apnsmock "github.com/apns-mock/apns-mock/clients/go"
)

// newStandIn serves handlers by path on a local HTTP server and returns its URL.
func newStandIn(t *testing.T, handlers map[string]http.HandlerFunc) string {
	t.Helper()
	mux := http.NewServeMux()
	for path, handler := range handlers {
		mux.HandleFunc(path, handler)
	}
	server := httptest.NewServer(mux)
	t.Cleanup(server.Close)
	return server.URL
}

// TestEventParsing feeds the stream reader what Server-Sent Events allow beside apns-mock's usual
// lines: CRLF, several data lines, named events, an id kept across events, blocks without data.
func TestEventParsing(t *testing.T) {
	server := newStandIn(t, map[string]http.HandlerFunc{
		"/v1/events": func(w http.ResponseWriter, r *http.Request) {
			if r.URL.RawQuery != "maxRate=5&outcome=all&since=3" || r.Header.Get("Last-Event-ID") != "7" {
				http.Error(w, `{"error":"unexpected request"}`, 400)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, ": apns-mock events\nretry: 2000\n\n"+
				"id: 8\ndata: {\"seq\":8,\"token\":\"ab\"}\n\n"+
				": keep-alive\n\n"+
				"event: skipped\r\ndata: {\"skipped\":2,\r\ndata: \"firstSeq\":9}\r\n\r\n"+
				"id: 9\n\n"+
				"data:{\"seq\":11}\n\n"+
				"id: 12\ndata: {\"seq\":12}") // cut off: no blank line
		},
	})
	stream, err := apnsmock.NewClient(server).Events(context.Background(),
		apnsmock.Query{Outcome: apnsmock.OutcomeAll, Since: apnsmock.Ptr[uint64](3)},
		apnsmock.EventOptions{MaxRate: 5, LastEventID: "7"})
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	want := []apnsmock.Event{
		{ID: "8", Type: "message", Data: []byte(`{"seq":8,"token":"ab"}`)},
		{ID: "8", Type: "skipped", Data: []byte("{\"skipped\":2,\n\"firstSeq\":9}")},
		{ID: "9", Type: "message", Data: []byte(`{"seq":11}`)},
	}
	for _, w := range want {
		got, err := stream.Next()
		if err != nil || got.ID != w.ID || got.Type != w.Type || string(got.Data) != string(w.Data) {
			t.Fatalf("event %+v (%s), %v; want %+v (%s)", got, got.Data, err, w, w.Data)
		}
	}
	if r, err := (apnsmock.Event{Data: want[0].Data}).Record(); err != nil || r.Seq != 8 || r.Token != "ab" {
		t.Errorf("record %+v, %v", r, err)
	}
	if got, err := stream.Next(); err != io.EOF {
		t.Errorf("at the end: %+v, %v; want io.EOF", got, err)
	}
}
