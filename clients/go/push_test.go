package apnsmock_test

// The mock the tests run against (scripts/client-tests starts one and exports MOCK_*), and a
// push helper in the way a Go provider pushes to APNs: net/http over TLS with HTTP/2, an ES256
// provider token signed with crypto/ecdsa.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"
)

// env holds the MOCK_* variables.
var env struct {
	adminURL, apnsURL, caFile, keyFile, keyID, teamID, topic string
	apnsPort, adminPort, channelsPort                        string
}

func TestMain(m *testing.M) {
	env.adminURL, env.apnsURL = os.Getenv("MOCK_ADMIN_URL"), os.Getenv("MOCK_APNS_URL")
	env.caFile, env.keyFile = os.Getenv("MOCK_CA_FILE"), os.Getenv("MOCK_KEY_FILE")
	env.keyID, env.teamID, env.topic = os.Getenv("MOCK_KEY_ID"), os.Getenv("MOCK_TEAM_ID"), os.Getenv("MOCK_TOPIC")
	env.apnsPort, env.adminPort, env.channelsPort = os.Getenv("MOCK_APNS_PORT"), os.Getenv("MOCK_ADMIN_PORT"), os.Getenv("MOCK_CHANNELS_PORT")
	if env.adminURL == "" || env.apnsURL == "" || env.caFile == "" || env.keyFile == "" {
		fmt.Println("skipped: no mock; run scripts/client-tests go (or set MOCK_ADMIN_URL, MOCK_APNS_URL, MOCK_CA_FILE, MOCK_KEY_FILE, MOCK_KEY_ID, MOCK_TEAM_ID, MOCK_TOPIC)")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// apnsResponse is APNs' answer to one push.
type apnsResponse struct {
	Status    int
	APNSID    string
	Reason    string `json:"reason"`
	Timestamp *int64 `json:"timestamp"`
}

var pusher struct {
	once   sync.Once
	err    error
	client *http.Client
	bearer string
}

// setUpPusher makes the HTTP/2 client (trusting the mock's CA) and signs one provider token for
// the whole run, as a provider keeps its token (APNs refuses one changed too often).
func setUpPusher() error {
	var err error
	if pusher.client, err = http2Client(); err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(env.keyFile)
	if err != nil {
		return err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return errors.New(env.keyFile + " is not PEM")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return err
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return errors.New(env.keyFile + " is not an ECDSA key")
	}
	pusher.bearer, err = providerToken(key, env.keyID, env.teamID)
	return err
}

// http2Client returns a client of the mock's APNs listener: HTTP/2 over TLS, trusting the mock's
// CA, with a transport (so connections) of its own.
func http2Client() (*http.Client, error) {
	caPEM, err := os.ReadFile(env.caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no certificate in " + env.caFile)
	}
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true},
	}, nil
}

// providerToken signs an ES256 provider token (JWT) for teamID's key keyID, issued now.
func providerToken(key *ecdsa.PrivateKey, keyID, teamID string) (string, error) {
	segment := func(v any) string {
		data, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(data)
	}
	input := segment(map[string]string{"alg": "ES256", "kid": keyID}) + "." +
		segment(map[string]any{"iss": teamID, "iat": time.Now().Unix()})
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
	if err != nil {
		return "", err
	}
	signature := make([]byte, 64) // JOSE: r || s, 32 bytes each
	r.FillBytes(signature[:32])
	s.FillBytes(signature[32:])
	return input + "." + base64.RawURLEncoding.EncodeToString(signature), nil
}

// push sends payload to the device token with apns-push-type alert, priority 10, and extra
// headers, and returns the answer.
func push(t *testing.T, token string, payload any, headers map[string]string) apnsResponse {
	t.Helper()
	if pusher.once.Do(func() { pusher.err = setUpPusher() }); pusher.err != nil {
		t.Fatal("push client:", pusher.err)
	}
	return pushWith(t, pusher.client, pusher.bearer, env.topic, token, payload, headers)
}

// pushWith pushes as push does, over client, with this provider token and topic.
func pushWith(t *testing.T, client *http.Client, bearer, topic, token string, payload any, headers map[string]string) apnsResponse {
	t.Helper()
	body, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, env.apnsURL+"/3/device/"+token, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("authorization", "bearer "+bearer)
	req.Header.Set("apns-topic", topic)
	req.Header.Set("apns-push-type", "alert")
	req.Header.Set("apns-priority", "10")
	for name, value := range headers {
		req.Header.Set(name, value)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal("push:", err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("push went over %s, not HTTP/2", resp.Proto)
	}
	answer := apnsResponse{Status: resp.StatusCode, APNSID: resp.Header.Get("apns-id")}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal("push:", err)
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &answer); err != nil {
			t.Fatalf("push: answer %q: %v", data, err)
		}
	}
	return answer
}

// sendAlert pushes {"aps":{"alert":{"title","body"}}} and expects 200 with an apns-id.
func sendAlert(t *testing.T, token, title, body string) apnsResponse {
	t.Helper()
	answer := push(t, token, alert(title, body), nil)
	if answer.Status != http.StatusOK || answer.APNSID == "" {
		t.Fatalf("push to %s: %+v, want 200 with an apns-id", token, answer)
	}
	return answer
}

func alert(title, body string) map[string]any {
	return map[string]any{"aps": map[string]any{"alert": map[string]any{"title": title, "body": body}}}
}

// newToken returns a random device token: 64 hex digits.
func newToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
