// Package apnsmock is a client for apns-mock's admin API (docs/admin-api.md): the calls a Go test
// makes to check what its code pushed to the mock, and to set the mock up (faults, devices,
// channels, the clock).
//
// It uses nothing but the standard library. Every method takes a context first; a call also ends
// after the client's timeout (WithTimeout, 10 s by default), except WaitFor, which waits longer
// than the wait it asks for, and Events, whose stream lasts until it is closed.
//
//	mock := apnsmock.NewClient("http://127.0.0.1:2198")
//	records, err := mock.WaitFor(ctx, apnsmock.Query{Token: token}, 1, 5*time.Second)
//
// Tests that share one mock at the same time each take a team of their own (NewTestTeam): a key
// to sign their provider tokens with, and an admin client scoped to the team (ForTeam) that sees
// only the team's records, faults, devices and clock.
package apnsmock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultBaseURL is the admin listener's default address.
const DefaultBaseURL = "http://127.0.0.1:2198"

// DefaultTimeout bounds every request of a Client made without WithTimeout.
const DefaultTimeout = 10 * time.Second

// Client calls one mock's admin API. It is safe for concurrent use.
type Client struct {
	baseURL string
	token   string
	team    string // the APNS-Mock-Team header's value, "" unscoped
	http    *http.Client
	timeout time.Duration
}

// Option configures a Client (NewClient).
type Option func(*Client)

// WithToken sends "Authorization: Bearer <token>" on every request, for a mock with admin.token set.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient makes requests with this client instead of http.DefaultClient. Its own Timeout, if
// any, applies too: leave it 0, so that WaitFor and Events can last longer than other calls.
func WithHTTPClient(client *http.Client) Option { return func(c *Client) { c.http = client } }

// WithTimeout bounds each request (DefaultTimeout without it). WaitFor allows its wait's timeout
// on top of it; Events is bounded by its context only.
func WithTimeout(timeout time.Duration) Option { return func(c *Client) { c.timeout = timeout } }

// NewClient returns a client of the admin API at baseURL ("http://127.0.0.1:2198" when empty).
func NewClient(baseURL string, opts ...Option) *Client {
	if baseURL == "" {
		baseURL = DefaultBaseURL
	}
	c := &Client{baseURL: strings.TrimRight(baseURL, "/"), http: http.DefaultClient, timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(c)
	}
	return c
}

// Error is a non-2xx answer of the admin API (other than WaitFor's 408, a *WaitTimeoutError).
type Error struct {
	Method string
	// Path is the request's path and query.
	Path string
	// Status is the HTTP status code.
	Status int
	// Message is the server's {"error": "..."} text as sent ("advanceSeconds: expected a whole
	// number ..."), or the body itself when it holds no such text.
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("apns-mock: %s %s answered %d: %s", e.Method, e.Path, e.Status, e.Message)
}

// Ptr returns a pointer to v, for the optional fields: Query{Since: apnsmock.Ptr(page.Next)}.
func Ptr[T any](v T) *T { return &v }

// request sends one request and reads the whole answer. body, when not nil, is sent as JSON.
// timeout bounds the request (0: only ctx does).
func (c *Client) request(ctx context.Context, method, path string, query url.Values, body any, timeout time.Duration) (*http.Response, []byte, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, method, path, query, body)
	if err != nil {
		return nil, nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("apns-mock: %s %s: reading the answer: %w", method, path, err)
	}
	return resp, data, nil
}

func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body any) (*http.Request, error) {
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("apns-mock: %s %s: encoding the body: %w", method, path, err)
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, reader)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.team != "" {
		req.Header.Set(TeamHeader, c.team)
	}
	return req, nil
}

// call sends a request, turns a non-2xx answer into *Error, and decodes a JSON answer into out
// (when not nil).
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	resp, data, err := c.request(ctx, method, path, query, body, c.timeout)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return newError(resp, data)
	}
	return decode(resp, data, out)
}

// text sends a GET and returns the answer's body as text (the CA, the metrics).
func (c *Client) text(ctx context.Context, path string) (string, error) {
	resp, data, err := c.request(ctx, http.MethodGet, path, nil, nil, c.timeout)
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", newError(resp, data)
	}
	return string(data), nil
}

func decode(resp *http.Response, data []byte, out any) error {
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("apns-mock: %s %s: the answer is not the JSON expected: %w", resp.Request.Method, resp.Request.URL.RequestURI(), err)
	}
	return nil
}

func newError(resp *http.Response, data []byte) *Error {
	e := &Error{Method: resp.Request.Method, Path: resp.Request.URL.RequestURI(), Status: resp.StatusCode}
	var body struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil {
		e.Message = *body.Error
	} else if text := strings.TrimSpace(string(data)); text != "" {
		e.Message = text
	} else {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// segment percent-encodes one path segment, "/" and "+" included (channel IDs are base64).
func segment(s string) string {
	return strings.ReplaceAll(url.PathEscape(s), "+", "%2B")
}
