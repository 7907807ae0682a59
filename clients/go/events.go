package apnsmock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// EventOptions are the event stream's settings beside its Query (whose Since and Limit apply too:
// resume after that seq, end after that many records).
type EventOptions struct {
	// MaxRate: at most this many records a second; the rest are reported in "skipped" events.
	// 0 leaves it unlimited.
	MaxRate int
	// LastEventID is sent as the Last-Event-ID header: resume after this seq (it wins over Since).
	LastEventID string
}

// Event is one Server-Sent Event of the stream.
type Event struct {
	// ID is the last "id:" seen on the stream: a record's seq.
	ID string
	// Type is "message" for a record, else the "event:" line ("skipped", "refused-streams").
	Type string
	// Data is the event's data: JSON for every event apns-mock sends.
	Data json.RawMessage
}

// Record decodes a "message" event's data.
func (e Event) Record() (Record, error) {
	var r Record
	err := json.Unmarshal(e.Data, &r)
	return r, err
}

// EventStream reads GET /v1/events. Call Close when done: it ends the connection.
type EventStream struct {
	body    io.ReadCloser
	reader  *bufio.Reader
	cancel  context.CancelFunc
	lastID  string
	pending *Event
	once    sync.Once
	closed  chan struct{}
}

// Events opens the event stream of the records q selects (GET /v1/events). It returns once the
// server has subscribed the stream, so a record stored afterwards is on it. The stream lasts until
// Close, ctx's end, or the server ending it (Query.Limit reached, shutdown): then Next returns
// io.EOF (after Close or the server's end) or ctx's error.
func (c *Client) Events(ctx context.Context, q Query, opts EventOptions) (*EventStream, error) {
	v := q.values()
	if opts.MaxRate != 0 {
		v.Set("maxRate", strconv.Itoa(opts.MaxRate))
	}
	ctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/events", v, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if opts.LastEventID != "" {
		req.Header.Set("Last-Event-ID", opts.LastEventID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer cancel()
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		return nil, newError(resp, data)
	}
	s := &EventStream{body: resp.Body, reader: bufio.NewReader(resp.Body), cancel: cancel, closed: make(chan struct{})}
	// apns-mock subscribes the stream, then writes ": apns-mock events" and "retry:" in a block of
	// their own: reading that block means that nothing stored from now on is missed.
	event, ok, err := s.readBlock()
	if err != nil {
		s.Close()
		return nil, err
	}
	if ok {
		s.pending = &event
	}
	return s, nil
}

// Next blocks until the next event and returns it; io.EOF once the stream ended or was closed.
func (s *EventStream) Next() (Event, error) {
	if s.pending != nil {
		event := *s.pending
		s.pending = nil
		return event, nil
	}
	for {
		event, ok, err := s.readBlock()
		if err != nil {
			select {
			case <-s.closed:
				return Event{}, io.EOF
			default:
				return Event{}, err
			}
		}
		if ok {
			return event, nil
		}
	}
}

// Close ends the stream and its connection. It may be called from another goroutine, to end a
// Next that waits, and more than once.
func (s *EventStream) Close() error {
	s.once.Do(func() {
		close(s.closed)
		s.cancel()
		s.body.Close()
	})
	return nil
}

// readBlock reads lines up to a blank line (one event's block) and reports whether it made an
// event: comments (":"), "retry:" and blocks without "data:" make none.
func (s *EventStream) readBlock() (Event, bool, error) {
	var data []string
	eventType := ""
	for {
		line, err := s.reader.ReadString('\n')
		if err != nil {
			// A block the stream did not end with a blank line is dropped, as EventSource does.
			if errors.Is(err, io.ErrUnexpectedEOF) {
				err = io.EOF
			}
			return Event{}, false, err
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if line == "" {
			if data == nil {
				return Event{}, false, nil
			}
			if eventType == "" {
				eventType = "message"
			}
			return Event{ID: s.lastID, Type: eventType, Data: json.RawMessage(strings.Join(data, "\n"))}, true, nil
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			eventType = value
		case "data":
			data = append(data, value)
		case "id":
			if !strings.Contains(value, "\x00") {
				s.lastID = value
			}
		}
	}
}
