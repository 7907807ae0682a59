package apnsmock_test

import (
	"context"
	"encoding/json"
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

	// The code under test pushes to the mock over HTTP/2 (here push_test.go's helper).
	token := "6a3f9c0e2b7d4185a6c3e9f01b2d4c6e8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d"
	sendAlert(t, token, "Hello", "from apns-mock")

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
