// Command go-apns2 sends pushes through apns-mock the way github.com/sideshow/apns2 does (and so
// gorush and most Go providers): net/http over golang.org/x/net/http2's Transport, a custom
// DialTLS, one POST per push with apns2's headers, and an ES256 provider token that is re-signed
// when it is 50 minutes old. Like providers built on apns2, it also signs a new token and retries
// once, on the same connection, when APNs answers 403 ExpiredProviderToken (apns2 exposes
// Token.Generate for that; the library itself only re-signs by age).
//
// It is pointed at the mock through apns2's own knobs: Client.Host ("https://127.0.0.1:<port>")
// and the transport's TLS configuration (the mock's CA in RootCAs, the client certificate for
// certificate auth).
//
// Usage: go-apns2 --port P --ca CA.pem --scenario NAME [--auth token|certificate]
//
//	[--key K.p8 --team T --key-id K] [--cert C.pem --cert-key K.pem] [--topic T]
//	--device HEX [--device HEX…] [--timeout S]
//
// It prints one JSON object like the Python drivers' (scripts/clients/driver_common.py), plus
// tokensSigned.
//
// With --steps it sends broadcast push instead, the way pushy does (broadcast.go):
// go-apns2 --port P --manage-port M --ca CA.pem --steps JSON [--bundle B]
// [--management-token every|first-stream] and the credentials as above.
package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// netVersion is golang.org/x/net's version, set by the build (scripts/clients/build-go).
var netVersion = "unknown"

// tokenTimeout is apns2's: a token is re-signed when it is this many seconds old.
const tokenTimeout = 3000

type providerToken struct {
	sync.Mutex
	key      *ecdsa.PrivateKey
	keyID    string
	teamID   string
	issuedAt int64
	bearer   string
	signed   int
}

func loadKey(path string) (*ecdsa.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("token key is not PEM")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := parsed.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("token key is not an ECDSA key")
	}
	return key, nil
}

func segment(value interface{}) string {
	data, _ := json.Marshal(value)
	return base64.RawURLEncoding.EncodeToString(data)
}

// generate signs a new token: header {"alg":"ES256","kid"}, claims {"iat","iss"} (a JSON
// object's keys in sorted order, as jwt-go writes a MapClaims), signature r‖s.
func (t *providerToken) generate() error {
	issuedAt := time.Now().Unix()
	input := segment(map[string]string{"alg": "ES256", "kid": t.keyID}) + "." +
		segment(map[string]interface{}{"iss": t.teamID, "iat": issuedAt})
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, t.key, digest[:])
	if err != nil {
		return err
	}
	signature := make([]byte, 64)
	r.FillBytes(signature[:32])
	s.FillBytes(signature[32:])
	t.issuedAt = issuedAt
	t.bearer = input + "." + base64.RawURLEncoding.EncodeToString(signature)
	t.signed++
	return nil
}

func (t *providerToken) generateIfExpired() (string, error) {
	t.Lock()
	defer t.Unlock()
	if time.Now().Unix() >= t.issuedAt+tokenTimeout {
		if err := t.generate(); err != nil {
			return "", err
		}
	}
	return t.bearer, nil
}

func (t *providerToken) regenerate() error {
	t.Lock()
	defer t.Unlock()
	return t.generate()
}

type response struct {
	StatusCode int
	Reason     string `json:"reason"`
	ApnsID     string
	// Timestamp is the 410 body's number as sent (milliseconds). apns2's Response.Timestamp
	// reads it as seconds.
	Timestamp *int64 `json:"timestamp"`
}

type client struct {
	host  string
	http  *http.Client
	token *providerToken
	topic string
}

func (c *client) push(device string, payload []byte) (*response, error) {
	request, err := http.NewRequest(http.MethodPost, c.host+"/3/device/"+device, bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	if c.token != nil {
		bearer, err := c.token.generateIfExpired()
		if err != nil {
			return nil, err
		}
		request.Header.Set("authorization", "bearer "+bearer)
	}
	request.Header.Set("Content-Type", "application/json; charset=utf-8")
	request.Header.Set("apns-topic", c.topic)
	request.Header.Set("apns-push-type", "alert")
	answer, err := c.http.Do(request)
	if err != nil {
		return nil, err
	}
	defer answer.Body.Close()
	result := &response{StatusCode: answer.StatusCode, ApnsID: answer.Header.Get("apns-id")}
	if err := json.NewDecoder(answer.Body).Decode(result); err != nil && err != io.EOF {
		return nil, err
	}
	return result, nil
}

func goVersion() string { return runtime.Version() + " golang.org/x/net " + netVersion }

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

type result struct {
	Device    string  `json:"device"`
	Sent      bool    `json:"sent"`
	Status    *int    `json:"status"`
	Reason    *string `json:"reason"`
	ApnsID    *string `json:"apnsId"`
	Timestamp *int64  `json:"timestamp"`
	Error     *string `json:"error"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func main() {
	port := flag.Int("port", 0, "the mock's APNs port on 127.0.0.1")
	caPath := flag.String("ca", "", "the mock's CA certificate")
	scenario := flag.String("scenario", "", "what the test is about")
	auth := flag.String("auth", "token", "token or certificate")
	keyPath := flag.String("key", "", "token auth: the .p8 key")
	team := flag.String("team", "", "token auth: team ID")
	keyID := flag.String("key-id", "", "token auth: key ID")
	certPath := flag.String("cert", "", "certificate auth: client certificate")
	certKeyPath := flag.String("cert-key", "", "certificate auth: its key")
	topic := flag.String("topic", "com.example.app", "apns-topic")
	timeout := flag.Float64("timeout", 30, "seconds for everything")
	var devices multiFlag
	flag.Var(&devices, "device", "a device token (repeatable)")
	steps := flag.String("steps", "", "broadcast push: the steps to run (JSON, see broadcast.go)")
	managePort := flag.Int("manage-port", 0, "broadcast push: the channel-management port on 127.0.0.1")
	bundle := flag.String("bundle", "com.example.app", "broadcast push: the app's bundle ID")
	managementToken := flag.String("management-token", "every", "broadcast push: authorization on every management request, or first-stream only")
	flag.Parse()
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "go-apns2:", err)
		os.Exit(2)
	}
	if *port == 0 || *caPath == "" || (len(devices) == 0 && *steps == "") {
		fail(errors.New("--port, --ca and --device (or --steps) are required"))
	}
	deadline := time.Duration(*timeout * float64(time.Second))
	time.AfterFunc(deadline, func() { fail(errors.New("timed out")) })

	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(*caPath)
	if err != nil {
		fail(err)
	}
	if !roots.AppendCertsFromPEM(caPEM) {
		fail(errors.New("no certificate in --ca"))
	}
	tlsConfig := &tls.Config{RootCAs: roots}
	var token *providerToken
	if *auth == "certificate" {
		certificate, err := tls.LoadX509KeyPair(*certPath, *certKeyPath)
		if err != nil {
			fail(err)
		}
		tlsConfig.Certificates = []tls.Certificate{certificate}
	} else {
		key, err := loadKey(*keyPath)
		if err != nil {
			fail(err)
		}
		token = &providerToken{key: key, keyID: *keyID, teamID: *team}
	}
	if *steps != "" {
		err := runBroadcast(broadcastOptions{
			scenario: *scenario, apnsPort: *port, managePort: *managePort, bundle: *bundle, tlsConfig: tlsConfig,
			token: token, managementToken: *managementToken, steps: *steps,
		})
		if err != nil {
			fail(err)
		}
		return
	}
	var dialed []string
	var dialedLock sync.Mutex
	transport := &http2.Transport{
		TLSClientConfig: tlsConfig,
		// apns2.DialTLS: a net.Dialer with timeout and keep-alive, then the TLS handshake.
		DialTLS: func(network, address string, config *tls.Config) (net.Conn, error) {
			dialedLock.Lock()
			dialed = append(dialed, address)
			dialedLock.Unlock()
			dialer := &net.Dialer{Timeout: 20 * time.Second, KeepAlive: 60 * time.Second}
			return tls.DialWithDialer(dialer, network, address, config)
		},
		ReadIdleTimeout: 15 * time.Second,
	}
	c := &client{
		host:  "https://127.0.0.1:" + strconv.Itoa(*port),
		http:  &http.Client{Transport: transport, Timeout: deadline},
		token: token,
		topic: *topic,
	}
	payload, _ := json.Marshal(map[string]interface{}{"aps": map[string]interface{}{"alert": "hello from go-apns2"}})
	results := []result{}
	for _, device := range devices {
		answer, err := c.push(device, payload)
		if err == nil && answer.StatusCode == http.StatusForbidden && answer.Reason == "ExpiredProviderToken" && token != nil {
			if err = token.regenerate(); err == nil {
				answer, err = c.push(device, payload)
			}
		}
		if err != nil {
			message := err.Error()
			results = append(results, result{Device: device, Error: &message})
			continue
		}
		status := answer.StatusCode
		results = append(results, result{
			Device: device, Sent: status == http.StatusOK, Status: &status, Reason: optional(answer.Reason),
			ApnsID: optional(answer.ApnsID), Timestamp: answer.Timestamp,
		})
	}
	signed := 0
	if token != nil {
		signed = token.signed
	}
	if dialed == nil {
		dialed = []string{}
	}
	output, _ := json.Marshal(map[string]interface{}{
		"client": "go-apns2", "version": goVersion(),
		"scenario": *scenario, "dialed": dialed, "results": results, "tokensSigned": signed,
	})
	fmt.Println(string(output))
}
