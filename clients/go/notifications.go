package apnsmock

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Outcome values for Query.Outcome.
const (
	OutcomeAccepted = "accepted" // a success (the default when neither Outcome nor Reason is set)
	OutcomeRejected = "rejected" // an error status or a fault action
	OutcomeAll      = "all"
)

// Query selects records (GET /v1/notifications, /wait and /v1/events). Empty fields are left out.
type Query struct {
	Token      string // compared ignoring case
	Topic      string
	PushType   string
	APNSID     string // compared ignoring case
	CollapseID string
	// Outcome is OutcomeAccepted, OutcomeRejected or OutcomeAll. The server's default is accepted,
	// or all when Reason is set.
	Outcome   string
	Reason    string // an APNs reason, e.g. "BadDeviceToken"
	Kind      string // "device", "broadcast" or "channel"
	ChannelID string
	// Since: only records after this seq (a Page's Next). Nil: from the start of the ring (for
	// Events: only new records).
	Since *uint64
	// Limit: at most this many records (1 to 10000); 0 leaves it to the server.
	Limit int
}

func (q Query) values() url.Values {
	v := url.Values{}
	for _, p := range []struct{ name, value string }{
		{"token", q.Token}, {"topic", q.Topic}, {"pushType", q.PushType}, {"apnsId", q.APNSID},
		{"collapseId", q.CollapseID}, {"outcome", q.Outcome}, {"reason", q.Reason}, {"kind", q.Kind},
		{"channelId", q.ChannelID},
	} {
		if p.value != "" {
			v.Set(p.name, p.value)
		}
	}
	if q.Since != nil {
		v.Set("since", strconv.FormatUint(*q.Since, 10))
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return v
}

// Record is one recorded request ("The record" in docs/admin-api.md). The server sends every key,
// null when absent: a null string is "" here, a null number nil (or 0 where noted).
type Record struct {
	Seq        uint64 `json:"seq"`
	APNSID     string `json:"apnsId"`
	UniqueID   string `json:"uniqueId"`
	ReceivedAt string `json:"receivedAt"` // RFC 3339, the wall clock
	MockTime   string `json:"mockTime"`   // the mock's time, while its clock runs ahead
	Token      string `json:"token"`      // lowercase
	Topic      string `json:"topic"`
	PushType   string `json:"pushType"`
	Priority   *int   `json:"priority"`
	Expiration *int64 `json:"expiration"`
	CollapseID string `json:"collapseId"`
	// Environment is "sandbox" or "production".
	Environment string `json:"environment"`
	Auth        Auth   `json:"auth"`
	// Payload is the body as the record holds it: JSON when PayloadEncoding is "json", else a
	// JSON string (text or base64); null for an empty body. See PayloadMap.
	Payload         json.RawMessage `json:"payload"`
	PayloadEncoding string          `json:"payloadEncoding"`
	PayloadSize     int             `json:"payloadSize"`
	// Status is the status answered; 0 when a fault's action replaced the response (see Action).
	Status          int               `json:"status"`
	Reason          string            `json:"reason"`
	Timestamp       *int64            `json:"timestamp"` // the 410 body's timestamp (ms)
	Lint            []Finding         `json:"lint"`
	Injected        bool              `json:"injected"` // a fault rule fired on it
	Action          string            `json:"action"`
	ConnectionID    uint64            `json:"connectionId"`
	StreamID        int32             `json:"streamId"`
	Headers         map[string]string `json:"headers"` // pseudo-headers included, never authorization
	Kind            string            `json:"kind"`    // "device", "broadcast" or "channel"
	ChannelID       string            `json:"channelId"`
	RequestID       string            `json:"requestId"`
	Operation       string            `json:"operation"`
	ResponseWritten bool              `json:"responseWritten"`
}

// Auth is how a request was authenticated (docs/authentication.md).
type Auth struct {
	Method        string `json:"method"`
	TeamID        string `json:"teamId"`
	KeyID         string `json:"keyId"`
	IATForm       string `json:"iatForm"`
	IAT           *int64 `json:"iat"`
	TokenID       string `json:"tokenId"`
	SignatureForm string `json:"signatureForm"`
}

// Finding is a lint finding: {"code":"missing-aps","message":"..."}.
type Finding struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// PayloadMap returns the payload as a JSON object (record.PayloadMap()["aps"]), or nil when it is
// not one.
func (r Record) PayloadMap() map[string]any {
	var m map[string]any
	if json.Unmarshal(r.Payload, &m) != nil {
		return nil
	}
	return m
}

// Page is one answer of Notifications: records oldest first.
type Page struct {
	Notifications []Record `json:"notifications"`
	// Next is the cursor to pass as Query.Since to continue.
	Next uint64 `json:"next"`
	// More is true when records after Next exist that this page did not look at.
	More bool `json:"more"`
}

// Notifications returns one page of the records q selects (GET /v1/notifications).
func (c *Client) Notifications(ctx context.Context, q Query) (Page, error) {
	var page Page
	err := c.call(ctx, http.MethodGet, "/v1/notifications", q.values(), nil, &page)
	return page, err
}

// DeleteNotifications forgets every record (DELETE /v1/notifications). Seq numbers go on.
func (c *Client) DeleteNotifications(ctx context.Context) error {
	return c.call(ctx, http.MethodDelete, "/v1/notifications", nil, nil, nil)
}

// WaitFor waits until count records match q, for at most timeout (GET /v1/notifications/wait),
// and returns them. When fewer arrive in time it returns a *WaitTimeoutError holding those that
// did. The request itself may take timeout plus the client's timeout.
func (c *Client) WaitFor(ctx context.Context, q Query, count int, timeout time.Duration) ([]Record, error) {
	v := q.values()
	v.Set("count", strconv.Itoa(count))
	v.Set("timeout", strconv.FormatFloat(timeout.Seconds(), 'f', -1, 64))
	resp, data, err := c.request(ctx, http.MethodGet, "/v1/notifications/wait", v, nil, timeout+c.timeout)
	if err != nil {
		return nil, err
	}
	var page Page
	switch resp.StatusCode {
	case http.StatusOK:
		err = decode(resp, data, &page)
		return page.Notifications, err
	case http.StatusRequestTimeout:
		if err = decode(resp, data, &page); err != nil {
			return nil, err
		}
		return nil, &WaitTimeoutError{
			Query: q, Timeout: timeout, Expected: count, Matched: len(page.Notifications), Records: page.Notifications,
		}
	default:
		return nil, newError(resp, data)
	}
}

// WaitTimeoutError is WaitFor's error when fewer than the records asked for arrived in time.
type WaitTimeoutError struct {
	Query   Query
	Timeout time.Duration
	// Expected is the count asked for, Matched how many records matched.
	Expected, Matched int
	// Records are the records that matched, oldest first.
	Records []Record
}

func (e *WaitTimeoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "apns-mock: waited %v for %d notification(s) matching %s: %d of %d matched",
		e.Timeout, e.Expected, describe(e.Query), e.Matched, e.Expected)
	if len(e.Records) == 0 {
		return b.String()
	}
	last := e.Records
	if len(last) > 5 {
		last = last[len(last)-5:]
	}
	fmt.Fprintf(&b, "; last %d seen:", len(last))
	for _, r := range last {
		status := strconv.Itoa(r.Status)
		if r.Status == 0 {
			status = "action=" + r.Action
		}
		fmt.Fprintf(&b, "\n  #%d %s", r.Seq, status)
		if r.Reason != "" {
			fmt.Fprintf(&b, " %s", r.Reason)
		}
		fmt.Fprintf(&b, " token=%s topic=%s", r.Token, r.Topic)
	}
	return b.String()
}

// describe spells a query for messages: "outcome=all token=ab12", or "anything".
func describe(q Query) string {
	v := q.values()
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return "anything"
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "=" + v.Get(k)
	}
	return strings.Join(keys, " ")
}
