// Broadcast push (--steps JSON), sent the way pushy sends it: channel management as pushy's
// branch broadcast_push_notifications does (ApnsChannelManagementClient and
// ApnsChannelManagementHandler), broadcasts as pushy PR #1097 does (ApnsClientHandler with
// TokenAuthenticationApnsClientHandler), here in Go on golang.org/x/net/http2.
//
// What the wire carries, as pushy writes it:
//   - One connection per host (pushy: a channel pool of one), each with its own provider token,
//     signed when the connection sends its first request. The notification connection sends
//     `authorization` on every request; on 403 ExpiredProviderToken the caller gets the rejection
//     and the connection is closed ("the server ... will wedge the connection"), so the next
//     request opens a new one with a new token. pushy does not resend by itself.
//   - Channel management: `:scheme`, `:authority` (the host name, no port), `:method`, `:path`
//     (/1/apps/<bundle>/channels or /all-channels), `apns-request-id` when the caller gives one,
//     `apns-channel-id` for read and delete, and the token. pushy's branch adds `authorization`
//     only when its handler signs a token, i.e. on a connection's first request (and again when
//     the token is 50 minutes old); --management-token first-stream reproduces that, the default
//     (every) sends it on each request as its notification handler does. The branch does not act
//     on ExpiredProviderToken here: the caller sees the 403 and the token stays.
//   - Create's body is `{"message-storage-policy":N,"push-type":"LiveActivity"}` (a HashMap of
//     these two keys iterates in this order); read, delete and list have no body (HEADERS with
//     END_STREAM). No content-length, user-agent or accept-encoding (netty sends none).
//   - Broadcasts: POST /4/broadcasts/apps/<bundle> with `apns-expiration` always (the
//     notification's invalidation time, 0 when it has none), `apns-priority` only when the
//     notification has a priority, `apns-push-type: liveactivity`, `apns-channel-id`, and no
//     `apns-topic`.
//   - Channel management needs token auth: with certificate credentials the branch cannot build
//     the management handler (getSigningKey().get()), and each management step reports that error.
//     Broadcasts work with either.
//   - Success is 201 (create), 200 (read, list, broadcast), 204 (delete); anything else is a
//     ChannelManagementException (status, apns-request-id, reason) or a rejected
//     PushNotificationResponse (status, reason, apns-id, apns-unique-id).
//
// The branch's channel-management client dials the APNs server address it was built with (work in
// progress); the driver dials the channel-management listener (--manage-port), as the branch's
// documentation links to Apple's hosts for it.
//
// Steps, in order: {"op":"create","policy":0|1[,"requestId":…]}, {"op":"read"|"delete"[,"channel":…]}
// (the last created channel unless given), {"op":"readAll"}, {"op":"broadcast"[,"channel":…]
// [,"expiry":N][,"priority":N]}. It prints {"client","version","scenario","dialed","tokensSigned",
// "steps":[{op, ok, status, reason, error, requestId, channelId, uniqueId, apnsId, policy,
// pushType, channels}]}: what pushy's response objects expose, null where they expose nothing.
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
)

type broadcastStep struct {
	Op        string `json:"op"`
	Policy    *int   `json:"policy"`
	Channel   string `json:"channel"`
	Expiry    *int64 `json:"expiry"`
	Priority  *int   `json:"priority"`
	RequestID string `json:"requestId"`
}

type stepResult struct {
	Op        string   `json:"op"`
	OK        bool     `json:"ok"`
	Status    *int     `json:"status"`
	Reason    *string  `json:"reason"`
	Error     *string  `json:"error"`
	RequestID *string  `json:"requestId"`
	ChannelID *string  `json:"channelId"`
	UniqueID  *string  `json:"uniqueId"`
	ApnsID    *string  `json:"apnsId"`
	Policy    *int     `json:"policy"`
	PushType  *string  `json:"pushType"`
	Channels  []string `json:"channels"`
}

// tokenSigner makes a provider token for each connection that needs one (pushy's
// AuthenticationToken, one per channel handler), as pushy writes it: header
// {"alg":"ES256","typ":"JWT","kid":…} and claims {"iss":…,"iat":…} in that order (its JSON
// serializer walks HashMaps whose order is fixed for these keys), and the signature as Java's
// Signature.getInstance("SHA256withECDSA") returns it: DER, base64url-encoded as it is (70 to 72
// bytes), not converted to JOSE's r‖s.
type tokenSigner struct {
	template *providerToken
	signed   int
}

func (s *tokenSigner) sign() (string, error) {
	input := `{"alg":"ES256","typ":"JWT","kid":"` + s.template.keyID + `"}`
	claims := fmt.Sprintf(`{"iss":"%s","iat":%d}`, s.template.teamID, time.Now().Unix())
	signingInput := base64.RawURLEncoding.EncodeToString([]byte(input)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(claims))
	digest := sha256.Sum256([]byte(signingInput))
	der, err := ecdsa.SignASN1(rand.Reader, s.template.key, digest[:])
	if err != nil {
		return "", err
	}
	s.signed++
	return signingInput + "." + base64.RawURLEncoding.EncodeToString(der), nil
}

// pushyConnection is one of pushy's channels with its handler's state: the connection and the
// token it signed.
type pushyConnection struct {
	address   string
	authority string
	tlsConfig *tls.Config
	transport *http2.Transport
	signer    *tokenSigner
	// tokenEveryRequest: send `authorization` on each request (else only with a newly signed token).
	tokenEveryRequest bool
	// closeOnExpiredToken: the notification handler's reaction to ExpiredProviderToken.
	closeOnExpiredToken bool
	// needsSigningKey: the branch's channel-management connections have token auth only.
	needsSigningKey bool
	dialed          *[]string

	conn   *http2.ClientConn
	bearer string
}

func (p *pushyConnection) clientConn() (*http2.ClientConn, error) {
	if p.conn != nil && p.conn.CanTakeNewRequest() {
		return p.conn, nil
	}
	// A new channel: a new handler, which has signed no token yet.
	p.conn, p.bearer = nil, ""
	*p.dialed = append(*p.dialed, p.address)
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 60 * time.Second}
	tlsConn, err := tls.DialWithDialer(dialer, "tcp", p.address, p.tlsConfig)
	if err != nil {
		return nil, err
	}
	if protocol := tlsConn.ConnectionState().NegotiatedProtocol; protocol != "h2" {
		tlsConn.Close()
		return nil, fmt.Errorf("ALPN negotiated %q, not h2", protocol)
	}
	conn, err := p.transport.NewClientConn(tlsConn)
	if err != nil {
		tlsConn.Close()
		return nil, err
	}
	p.conn = conn
	return conn, nil
}

type exchange struct {
	status  int
	headers http.Header
	body    []byte
}

// do sends one request as pushy's handlers write it and reads the whole response.
func (p *pushyConnection) do(method, path string, headers map[string]string, body []byte) (*exchange, error) {
	if p.signer == nil && p.needsSigningKey {
		// The branch's ApnsChannelManagementChannelFactory builds its handler with
		// clientConfiguration.getSigningKey().get(): a client with certificate credentials
		// cannot open a channel-management connection.
		return nil, errors.New("java.util.NoSuchElementException: No value present (channel management needs a signing key)")
	}
	conn, err := p.clientConn()
	if err != nil {
		return nil, err
	}
	var reader io.Reader
	if body != nil {
		reader = bytes.NewReader(body)
	}
	request, err := http.NewRequest(method, "https://"+p.address+path, reader)
	if err != nil {
		return nil, err
	}
	request.Host = p.authority
	// netty writes DATA until END_STREAM without a content-length, and no user-agent.
	request.ContentLength = 0
	request.Header["User-Agent"] = []string{""}
	for name, value := range headers {
		request.Header[name] = []string{value}
	}
	if p.signer != nil {
		fresh := p.bearer == ""
		if fresh {
			if p.bearer, err = p.signer.sign(); err != nil {
				return nil, err
			}
		}
		if fresh || p.tokenEveryRequest {
			request.Header["authorization"] = []string{"bearer " + p.bearer}
		}
	}
	response, err := conn.RoundTrip(request)
	if err != nil {
		return nil, err
	}
	defer response.Body.Close()
	data, err := io.ReadAll(response.Body)
	if err != nil {
		return nil, err
	}
	return &exchange{status: response.StatusCode, headers: response.Header, body: data}, nil
}

func (p *pushyConnection) close() {
	if p.conn != nil {
		p.conn.Close()
		p.conn, p.bearer = nil, ""
	}
}

var canonicalUUID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// uuidHeader is a UUID header as pushy reads it (FastUUID.parseUUID, printed in lower case), or
// nil when absent or not a UUID.
func uuidHeader(headers http.Header, name string) *string {
	value := headers.Get(name)
	if !canonicalUUID.MatchString(value) {
		return nil
	}
	lower := strings.ToLower(value)
	return &lower
}

// errorReason is pushy's getErrorReason / ErrorResponse: the body's "reason", if any.
func errorReason(body []byte) *string {
	var parsed struct {
		Reason *string `json:"reason"`
	}
	if json.Unmarshal(body, &parsed) != nil {
		return nil
	}
	return parsed.Reason
}

type broadcastOptions struct {
	scenario        string
	apnsPort        int
	managePort      int
	bundle          string
	tlsConfig       *tls.Config
	token           *providerToken
	managementToken string
	steps           string
}

func runBroadcast(options broadcastOptions) error {
	var steps []broadcastStep
	if err := json.Unmarshal([]byte(options.steps), &steps); err != nil {
		return fmt.Errorf("--steps: %w", err)
	}
	if options.managementToken != "every" && options.managementToken != "first-stream" {
		return errors.New("--management-token is every or first-stream")
	}
	tlsConfig := options.tlsConfig.Clone()
	tlsConfig.NextProtos = []string{"h2"}
	// pushy's client has no gzip and sends its own headers only.
	transport := &http2.Transport{TLSClientConfig: tlsConfig, DisableCompression: true, ReadIdleTimeout: 15 * time.Second}
	var signer *tokenSigner
	if options.token != nil {
		signer = &tokenSigner{template: options.token}
	}
	dialed := []string{}
	const host = "127.0.0.1"
	management := &pushyConnection{
		address: net.JoinHostPort(host, strconv.Itoa(options.managePort)), authority: host, tlsConfig: tlsConfig,
		transport: transport, signer: signer, tokenEveryRequest: options.managementToken == "every", needsSigningKey: true,
		dialed: &dialed,
	}
	notifications := &pushyConnection{
		address: net.JoinHostPort(host, strconv.Itoa(options.apnsPort)), authority: host, tlsConfig: tlsConfig,
		transport: transport, signer: signer, tokenEveryRequest: true, closeOnExpiredToken: true, dialed: &dialed,
	}
	channelsPath := "/1/apps/" + options.bundle + "/channels"
	created := ""
	results := []stepResult{}
	for _, step := range steps {
		result := stepResult{Op: step.Op}
		channel := step.Channel
		if channel == "" {
			channel = created
		}
		headers := map[string]string{}
		if step.RequestID != "" {
			headers["apns-request-id"] = step.RequestID
		}
		var answer *exchange
		var err error
		switch step.Op {
		case "create":
			if step.Policy == nil {
				return errors.New("create needs a policy")
			}
			body := fmt.Sprintf(`{"message-storage-policy":%d,"push-type":"LiveActivity"}`, *step.Policy)
			answer, err = management.do(http.MethodPost, channelsPath, headers, []byte(body))
		case "read", "delete":
			headers["apns-channel-id"] = channel
			method := http.MethodGet
			if step.Op == "delete" {
				method = http.MethodDelete
			}
			answer, err = management.do(method, channelsPath, headers, nil)
		case "readAll":
			answer, err = management.do(http.MethodGet, "/1/apps/"+options.bundle+"/all-channels", headers, nil)
		case "broadcast":
			expiration := int64(0)
			if step.Expiry != nil {
				expiration = *step.Expiry
			}
			headers["apns-expiration"] = strconv.FormatInt(expiration, 10)
			if step.Priority != nil {
				headers["apns-priority"] = strconv.Itoa(*step.Priority)
			}
			headers["apns-push-type"] = "liveactivity"
			headers["apns-channel-id"] = channel
			payload := fmt.Sprintf(`{"aps":{"timestamp":%d,"event":"update","content-state":{"score":"1-0"}}}`, time.Now().Unix())
			answer, err = notifications.do(http.MethodPost, "/4/broadcasts/apps/"+options.bundle, headers, []byte(payload))
		default:
			return fmt.Errorf("unknown step %q", step.Op)
		}
		if err != nil {
			message := err.Error()
			result.Error = &message
			results = append(results, result)
			continue
		}
		status := answer.status
		result.Status = &status
		switch step.Op {
		case "broadcast":
			// PushNotificationResponse (PR #1097) and BroadcastPushNotificationResponse (branch).
			result.OK = status == http.StatusOK
			result.ApnsID = uuidHeader(answer.headers, "apns-id")
			result.UniqueID = uuidHeader(answer.headers, "apns-unique-id")
			result.RequestID = uuidHeader(answer.headers, "apns-request-id")
			if !result.OK {
				result.Reason = errorReason(answer.body)
				if result.Reason != nil && *result.Reason == "ExpiredProviderToken" && notifications.closeOnExpiredToken {
					notifications.close()
				}
			}
		default:
			result.RequestID = uuidHeader(answer.headers, "apns-request-id")
			success := map[string]int{"create": http.StatusCreated, "read": http.StatusOK, "delete": http.StatusNoContent,
				"readAll": http.StatusOK}[step.Op]
			if status != success {
				// ChannelManagementException.
				result.Reason = errorReason(answer.body)
				break
			}
			if err := readManagementAnswer(step.Op, answer, &result); err != nil {
				message := err.Error()
				result.Error = &message
				break
			}
			result.OK = true
			if step.Op == "create" {
				created = *result.ChannelID
			}
		}
		results = append(results, result)
	}
	management.close()
	notifications.close()
	signed := 0
	if signer != nil {
		signed = signer.signed
	}
	output, _ := json.Marshal(map[string]interface{}{
		"client": "go-apns2", "version": goVersion(), "scenario": options.scenario, "dialed": dialed,
		"tokensSigned": signed, "steps": results,
	})
	fmt.Println(string(output))
	return nil
}

// readManagementAnswer reads a successful answer as pushy's ApnsChannelManagementClient does.
func readManagementAnswer(op string, answer *exchange, result *stepResult) error {
	switch op {
	case "create":
		// http2Response.getHeaders().get(CHANNEL_ID_HEADER).toString(): absent is an exception.
		values, present := answer.headers["Apns-Channel-Id"]
		if !present || len(values) == 0 {
			return errors.New("201 without apns-channel-id")
		}
		result.ChannelID = &values[0]
	case "read":
		var parsed map[string]interface{}
		if err := json.Unmarshal(answer.body, &parsed); err != nil {
			return fmt.Errorf("read body: %w", err)
		}
		// ((Long) parsed.get("message-storage-policy")).intValue(), then getFromCode.
		number, isNumber := parsed["message-storage-policy"].(float64)
		if !isNumber || number != float64(int64(number)) {
			return fmt.Errorf("message-storage-policy is not an integer: %v", parsed["message-storage-policy"])
		}
		if number != 0 && number != 1 {
			return fmt.Errorf("no message storage policy found with code %v", number)
		}
		policy := int(number)
		result.Policy = &policy
	case "readAll":
		var parsed struct {
			Channels []string `json:"channels"`
		}
		if err := json.Unmarshal(answer.body, &parsed); err != nil {
			return fmt.Errorf("all-channels body: %w", err)
		}
		result.Channels = parsed.Channels
	}
	return nil
}
