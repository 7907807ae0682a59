package apnsmock

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Health is GET /v1/health's answer.
type Health struct {
	Status string      `json:"status"` // "ok", or "degraded" while a shared state's database is unreachable
	Ports  HealthPorts `json:"ports"`
	Reason string      `json:"reason,omitempty"` // why the status is "degraded"; "" otherwise
}

// HealthPorts are the ports the mock's listeners are bound to.
type HealthPorts struct {
	APNS                int   `json:"apns"`
	APNSAdditional      []int `json:"apnsAdditional"`
	Admin               int   `json:"admin"`
	BroadcastSandbox    int   `json:"broadcastSandbox"`
	BroadcastProduction int   `json:"broadcastProduction"`
	Proxy               int   `json:"proxy"` // 0 without the CONNECT proxy listener
}

// Health asks whether every listener is bound (GET /v1/health). A mock starting or stopping
// answers 503: an *Error whose Message is the body.
func (c *Client) Health(ctx context.Context) (Health, error) {
	var h Health
	err := c.call(ctx, http.MethodGet, "/v1/health", nil, nil, &h)
	return h, err
}

// FaultRule is a fault rule as the mock lists it (docs/admin-api.md, "Faults"). The rules added
// are plain JSON objects (map[string]any), or a FaultRule with only the rule's fields set.
type FaultRule struct {
	ID          string         `json:"id,omitempty"`
	Match       FaultMatch     `json:"match"`
	Respond     *FaultResponse `json:"respond,omitempty"`
	Action      string         `json:"action,omitempty"`
	DelayMs     int            `json:"delayMs,omitempty"`
	Times       *int           `json:"times,omitempty"`
	Probability float64        `json:"probability,omitempty"`
	// MaxConcurrentStreams (shrink-streams) and DurationMs (shrink-streams, ignore-pings).
	MaxConcurrentStreams int `json:"maxConcurrentStreams,omitempty"`
	DurationMs           int `json:"durationMs,omitempty"`
	// Remaining counts Times down; Applied counts the requests the rule fired on.
	Remaining *int `json:"remaining,omitempty"`
	Applied   int  `json:"applied,omitempty"`
}

// FaultMatch is the requests a rule applies to.
type FaultMatch struct {
	Token     string `json:"token,omitempty"`
	Topic     string `json:"topic,omitempty"`
	PushType  string `json:"pushType,omitempty"`
	Kind      string `json:"kind,omitempty"`
	ChannelID string `json:"channelId,omitempty"`
	// Connection and AfterRequests: the Nth connection since start or Reset, from its request
	// AfterRequests+1 on.
	Connection    int  `json:"connection,omitempty"`
	AfterRequests *int `json:"afterRequests,omitempty"`
}

// FaultResponse is the answer a rule sends instead of the normal one.
type FaultResponse struct {
	Status    int    `json:"status,omitempty"`
	Reason    string `json:"reason"`
	Timestamp *int64 `json:"timestamp,omitempty"`
}

// AddFault adds one rule (POST /v1/faults), e.g.
// map[string]any{"match": map[string]any{"token": t}, "respond": map[string]any{"reason": "BadDeviceToken"}, "times": 1}.
func (c *Client) AddFault(ctx context.Context, rule any) (FaultRule, error) {
	var added FaultRule
	err := c.call(ctx, http.MethodPost, "/v1/faults", nil, rule, &added)
	return added, err
}

// AddFaults adds several rules, all or none (POST /v1/faults with a list).
func (c *Client) AddFaults(ctx context.Context, rules []any) ([]FaultRule, error) {
	if rules == nil {
		rules = []any{}
	}
	var list struct {
		Faults []FaultRule `json:"faults"`
	}
	err := c.call(ctx, http.MethodPost, "/v1/faults", nil, rules, &list)
	return list.Faults, err
}

// Faults lists the rules in the order they are tried (GET /v1/faults).
func (c *Client) Faults(ctx context.Context) ([]FaultRule, error) {
	var list struct {
		Faults []FaultRule `json:"faults"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/faults", nil, nil, &list)
	return list.Faults, err
}

// RemoveFault removes one rule (DELETE /v1/faults/{id}); an unknown id is a 404 *Error.
func (c *Client) RemoveFault(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/v1/faults/"+segment(id), nil, nil, nil)
}

// ClearFaults removes every rule (DELETE /v1/faults).
func (c *Client) ClearFaults(ctx context.Context) error {
	return c.call(ctx, http.MethodDelete, "/v1/faults", nil, nil, nil)
}

// Device is a device of the mock's registry. Registering, UnregisteredAt (RFC 3339) and Reason
// ("Unregistered" or "ExpiredToken") say since when and why the token is no longer valid;
// Timestamp is not sent.
type Device struct {
	Token          string `json:"token"`
	Topic          string `json:"topic,omitempty"`
	Environment    string `json:"environment,omitempty"` // "sandbox" or "production"
	UnregisteredAt string `json:"unregisteredAt,omitempty"`
	// Timestamp is UnregisteredAt in milliseconds, as the mock lists it.
	Timestamp *int64 `json:"timestamp,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// DeviceList is GET /v1/devices's answer.
type DeviceList struct {
	Policy  string   `json:"policy"` // "open" or "registered"
	Devices []Device `json:"devices"`
}

// RegisterDevice adds or replaces a device (POST /v1/devices) and returns it as the mock holds it.
func (c *Client) RegisterDevice(ctx context.Context, d Device) (Device, error) {
	d.Timestamp = nil
	var out Device
	err := c.call(ctx, http.MethodPost, "/v1/devices", nil, d, &out)
	return out, err
}

// Devices lists the registry (GET /v1/devices).
func (c *Client) Devices(ctx context.Context) (DeviceList, error) {
	var list DeviceList
	err := c.call(ctx, http.MethodGet, "/v1/devices", nil, nil, &list)
	return list, err
}

// Unregistration says when and why a token stops being valid (UnregisterDevice).
type Unregistration struct {
	// Timestamp is the 410's timestamp; zero: the mock's now.
	Timestamp time.Time
	// Reason is "Unregistered" (when empty) or "ExpiredToken".
	Reason string
}

// UnregisterDevice makes pushes to token answer 410 (POST /v1/devices/{token}/unregister). A token
// the registry does not hold is added.
func (c *Client) UnregisterDevice(ctx context.Context, token string, u Unregistration) (Device, error) {
	body := map[string]any{}
	if !u.Timestamp.IsZero() {
		body["timestamp"] = u.Timestamp.UnixMilli()
	}
	if u.Reason != "" {
		body["reason"] = u.Reason
	}
	var out Device
	err := c.call(ctx, http.MethodPost, "/v1/devices/"+segment(token)+"/unregister", nil, body, &out)
	return out, err
}

// RemoveDevice removes a device from the registry (DELETE /v1/devices/{token}); an unknown token
// is a 404 *Error.
func (c *Client) RemoveDevice(ctx context.Context, token string) error {
	return c.call(ctx, http.MethodDelete, "/v1/devices/"+segment(token), nil, nil, nil)
}

// Channel is a broadcast channel. Creating one, BundleID is required; the mock fills in the rest
// (sandbox, a generated ID, policy 1) when they are empty or nil.
type Channel struct {
	BundleID    string `json:"bundleId"`
	Environment string `json:"environment,omitempty"`
	ChannelID   string `json:"channelId,omitempty"`
	// MessageStoragePolicy is 0 or 1.
	MessageStoragePolicy *int `json:"messageStoragePolicy,omitempty"`
}

// ChannelQuery filters Channels; empty fields match every channel.
type ChannelQuery struct {
	BundleID    string
	Environment string
}

// Channels lists the broadcast channels (GET /v1/channels).
func (c *Client) Channels(ctx context.Context, q ChannelQuery) ([]Channel, error) {
	v := url.Values{}
	if q.BundleID != "" {
		v.Set("bundleId", q.BundleID)
	}
	if q.Environment != "" {
		v.Set("environment", q.Environment)
	}
	var list struct {
		Channels []Channel `json:"channels"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/channels", v, nil, &list)
	return list.Channels, err
}

// CreateChannel creates a channel (POST /v1/channels) and returns it; an existing ID is a 409
// *Error.
func (c *Client) CreateChannel(ctx context.Context, ch Channel) (Channel, error) {
	var out Channel
	err := c.call(ctx, http.MethodPost, "/v1/channels", nil, ch, &out)
	return out, err
}

// DeleteChannel deletes a channel (DELETE /v1/channels/{id}, the ID percent-encoded); an unknown
// ID is a 404 *Error.
func (c *Client) DeleteChannel(ctx context.Context, channelID string) error {
	return c.call(ctx, http.MethodDelete, "/v1/channels/"+segment(channelID), nil, nil, nil)
}

// Clock is the mock's time (GET /v1/clock).
type Clock struct {
	// OffsetSeconds is how far the mock's time runs ahead of the wall clock (for a team: the
	// global offset plus the team's own).
	OffsetSeconds int64  `json:"offsetSeconds"`
	Now           string `json:"now"`       // the mock's time, RFC 3339
	WallClock     string `json:"wallClock"` // RFC 3339
	// TeamOffsetSeconds is the team's own part of OffsetSeconds (a client scoped to a team; 0
	// otherwise).
	TeamOffsetSeconds int64 `json:"teamOffsetSeconds"`
}

// Clock returns the mock's time (GET /v1/clock).
func (c *Client) Clock(ctx context.Context) (Clock, error) {
	var clock Clock
	err := c.call(ctx, http.MethodGet, "/v1/clock", nil, nil, &clock)
	return clock, err
}

// AdvanceClock moves the mock's time seconds ahead (POST /v1/clock): tokens age, rate limits
// refill. It never goes back (Reset sets it to the wall clock); a negative number is a 400 *Error.
func (c *Client) AdvanceClock(ctx context.Context, seconds int64) (Clock, error) {
	var clock Clock
	err := c.call(ctx, http.MethodPost, "/v1/clock", nil, map[string]int64{"advanceSeconds": seconds}, &clock)
	return clock, err
}

// Reset forgets the records and sets the devices, channels, fault rules and clock back to the
// configuration's (POST /v1/reset). Call it first in every test. Unscoped, it resets every team's
// state too (teams added at run time stay); scoped to a team, only that team's.
func (c *Client) Reset(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "/v1/reset", nil, nil, nil)
}

// Stats returns the counters (GET /v1/stats): "requests", "accepted", "rejected", "byStatus",
// "byReason", "connections", "recording"... Numbers are float64. Scoped to a team: the team's
// counts, and "team".
func (c *Client) Stats(ctx context.Context) (map[string]any, error) {
	var stats map[string]any
	err := c.call(ctx, http.MethodGet, "/v1/stats", nil, nil, &stats)
	return stats, err
}

// Reason is an APNs reason, its status and what it means.
type Reason struct {
	Reason      string `json:"reason"`
	Status      int    `json:"status"`
	Explanation string `json:"explanation"`
}

// Reasons lists every reason APNs sends (GET /v1/reasons).
func (c *Client) Reasons(ctx context.Context) ([]Reason, error) {
	var list struct {
		Reasons []Reason `json:"reasons"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/reasons", nil, nil, &list)
	return list.Reasons, err
}

// CAPEM returns the CA certificate the mock's TLS listeners are issued under, PEM (GET
// /v1/ca.pem), for a client's RootCAs.
func (c *Client) CAPEM(ctx context.Context) (string, error) {
	return c.text(ctx, "/v1/ca.pem")
}

// Metrics returns the Prometheus text of GET /metrics.
func (c *Client) Metrics(ctx context.Context) (string, error) {
	return c.text(ctx, "/metrics")
}
