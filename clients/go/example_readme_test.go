package apnsmock_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	apnsmock "github.com/apns-mock/apns-mock/clients/go"
)

func TestReadmeExample(t *testing.T) {
	ctx := context.Background()
	mock := apnsmock.NewClient(os.Getenv("MOCK_ADMIN_URL")) // "": http://127.0.0.1:2198
	if err := mock.Reset(ctx); err != nil {
		t.Fatal(err)
	}

	// The code under test pushes to the mock over HTTP/2 (here: sendWelcome, below).
	token := "6a3f9c0e2b7d4185a6c3e9f01b2d4c6e8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d"
	if status, err := sendWelcome(token, "Hello", "from apns-mock"); err != nil || status != 200 {
		t.Fatalf("push: status %d, %v", status, err)
	}

	records, err := mock.WaitFor(ctx, apnsmock.Query{Token: token}, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err) // a *WaitTimeoutError says how many matched and shows the last records seen
	}
	var payload struct {
		APS struct{ Alert struct{ Title string } } `json:"aps"`
	}
	if err := json.Unmarshal(records[0].Payload, &payload); err != nil {
		t.Fatal(err)
	}
	if payload.APS.Alert.Title != "Hello" {
		t.Errorf("title = %q", payload.APS.Alert.Title)
	}
	if got := records[0].Headers["apns-push-type"]; got != "alert" {
		t.Errorf("apns-push-type = %q", got)
	}
}

// sendWelcome is what a Go provider does: net/http over TLS (HTTP/2), trusting the mock's CA,
// with an ES256 provider token signed with crypto/ecdsa.
func sendWelcome(token, title, body string) (int, error) {
	caPEM, err := os.ReadFile(os.Getenv("MOCK_CA_FILE")) // the mock's certs/ca.pem
	if err != nil {
		return 0, err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}

	keyPEM, err := os.ReadFile(os.Getenv("MOCK_KEY_FILE")) // certs/AuthKey_DEMOKEY001.p8
	if err != nil {
		return 0, err
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return 0, fmt.Errorf("no PEM in MOCK_KEY_FILE")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return 0, err
	}
	part := func(v any) string { data, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(data) }
	input := part(map[string]string{"alg": "ES256", "kid": os.Getenv("MOCK_KEY_ID")}) + "." +
		part(map[string]any{"iss": os.Getenv("MOCK_TEAM_ID"), "iat": time.Now().Unix()})
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key.(*ecdsa.PrivateKey), digest[:])
	if err != nil {
		return 0, err
	}
	signature := make([]byte, 64) // JOSE: r || s, 32 bytes each
	r.FillBytes(signature[:32])
	s.FillBytes(signature[32:])

	payload, _ := json.Marshal(map[string]any{"aps": map[string]any{"alert": map[string]string{"title": title, "body": body}}})
	req, err := http.NewRequest(http.MethodPost, os.Getenv("MOCK_APNS_URL")+"/3/device/"+token, bytes.NewReader(payload))
	if err != nil {
		return 0, err
	}
	req.Header.Set("authorization", "bearer "+input+"."+base64.RawURLEncoding.EncodeToString(signature))
	req.Header.Set("apns-topic", os.Getenv("MOCK_TOPIC"))
	req.Header.Set("apns-push-type", "alert")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}
