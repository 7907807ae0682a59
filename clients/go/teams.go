package apnsmock

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// TeamHeader is the header that scopes an admin call to one team (a Client made with WithTeam or
// ForTeam sends it on every request).
const TeamHeader = "APNS-Mock-Team"

// WithTeam scopes every admin call of the client to one team (the header APNS-Mock-Team): its
// records, stats, devices, faults, channels, clock and reset only. "" leaves the client unscoped
// (the whole mock). Team management (CreateTeam, Teams, DeleteTeam) is never scoped.
func WithTeam(teamID string) Option { return func(c *Client) { c.team = teamID } }

// ForTeam returns a client like c (same address, token, timeout and HTTP client) whose admin calls
// are scoped to teamID; "" returns an unscoped one. c itself is unchanged.
func (c *Client) ForTeam(teamID string) *Client {
	scoped := *c
	scoped.team = teamID
	return &scoped
}

// Team is the team the client's admin calls are scoped to, "" when unscoped.
func (c *Client) Team() string { return c.team }

// Team is a team to add at run time (POST /v1/teams): a developer team of the mock, with its own
// apps (each app belongs to one team only), signing keys and, optionally, devices.
type Team struct {
	// TeamID is 10 uppercase letters and digits (NewTeamID makes one).
	TeamID string `json:"teamId"`
	// Apps are the team's bundle IDs, at least one; an app of another team is a 409.
	Apps []string  `json:"apps"`
	Keys []TeamKey `json:"keys,omitempty"`
	// Devices, when not nil, is the team's own device registry.
	Devices *TeamDevices `json:"devices,omitempty"`
}

// TeamKey is a signing key of a team. Adding a team, PEM is the P-256 key: its public key
// ("-----BEGIN PUBLIC KEY-----") or the private .p8. The mock lists keys without PEM.
type TeamKey struct {
	// KeyID is 10 uppercase letters and digits, unique across the mock's teams.
	KeyID string `json:"keyId"`
	PEM   string `json:"pem,omitempty"`
	// Environment is "any" (when empty), "sandbox" or "production".
	Environment string `json:"environment,omitempty"`
	// Topics are the apps the key may push to (a subset of the team's apps); empty: all of them.
	Topics       []string `json:"topics,omitempty"`
	RelatedKeyID string   `json:"relatedKeyId,omitempty"`
}

// TeamDevices is a team's device registry: Policy "open" or "registered" ("" leaves the mock's
// policy in force), and the devices it starts with (Token, Topic, Environment, UnregisteredAt,
// Reason; Timestamp is not sent).
type TeamDevices struct {
	Policy string   `json:"policy,omitempty"`
	Tokens []Device `json:"tokens,omitempty"`
}

// TeamView is a team as the mock lists it (GET /v1/teams, POST /v1/teams's answer).
type TeamView struct {
	TeamID string    `json:"teamId"`
	Apps   []string  `json:"apps"`
	Keys   []TeamKey `json:"keys"` // without PEM
	// Devices: the team's device policy ("" when it set none: the mock's applies) and how many
	// devices it registered.
	Devices struct {
		Policy string `json:"policy"`
		Count  int    `json:"count"`
	} `json:"devices"`
	// Source is "configuration" (from the configuration file: it cannot be deleted) or "api".
	Source string `json:"source"`
}

// CreateTeam adds a team (POST /v1/teams) and returns it as the mock lists it. A malformed team is
// a 400 *Error naming the field ("keys[0].pem: ..."); a team ID, key ID or app already taken, or
// the limit of 1,000 teams reached, a 409 *Error.
func (c *Client) CreateTeam(ctx context.Context, team Team) (TeamView, error) {
	if team.Apps == nil {
		team.Apps = []string{}
	}
	if team.Devices != nil {
		devices := *team.Devices
		devices.Tokens = make([]Device, len(team.Devices.Tokens))
		for i, d := range team.Devices.Tokens {
			d.Timestamp = nil
			devices.Tokens[i] = d
		}
		team.Devices = &devices
	}
	var view TeamView
	err := c.call(ctx, http.MethodPost, "/v1/teams", nil, team, &view)
	return view, err
}

// Teams lists the mock's teams (GET /v1/teams): those of the configuration first, then those added,
// in the order they were added.
func (c *Client) Teams(ctx context.Context) ([]TeamView, error) {
	var list struct {
		Teams []TeamView `json:"teams"`
	}
	err := c.call(ctx, http.MethodGet, "/v1/teams", nil, nil, &list)
	return list.Teams, err
}

// DeleteTeam removes a team added at run time (DELETE /v1/teams/{teamId}): its keys (their tokens
// are 403 InvalidProviderToken from then on), records, devices, faults, channels and clock. An
// unknown team is a 404 *Error, a team of the configuration file a 409 *Error.
func (c *Client) DeleteTeam(ctx context.Context, teamID string) error {
	return c.call(ctx, http.MethodDelete, "/v1/teams/"+segment(teamID), nil, nil, nil)
}

const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// NewTeamID returns a random ID of Apple's form, 10 uppercase letters and digits: a team ID or a
// key ID.
func NewTeamID() string {
	id := make([]byte, 0, 10)
	random := make([]byte, 16)
	for len(id) < 10 {
		if _, err := rand.Read(random); err != nil {
			panic("apns-mock: crypto/rand: " + err.Error())
		}
		for _, b := range random {
			// 252 = 7 x 36: the bytes above it are skipped, so that every character is as likely.
			if b < 252 && len(id) < 10 {
				id = append(id, idAlphabet[int(b)%len(idAlphabet)])
			}
		}
	}
	return string(id)
}

// SigningKey is a fresh P-256 provider key (NewSigningKey).
type SigningKey struct {
	KeyID string
	// PrivateKey is the key itself, for signing ES256 provider tokens.
	PrivateKey *ecdsa.PrivateKey
	// PrivateKeyPEM is the key as Apple's .p8 holds it: PKCS #8, "-----BEGIN PRIVATE KEY-----".
	PrivateKeyPEM string
	// PublicKeyPEM is its public key, PKIX, "-----BEGIN PUBLIC KEY-----": what the mock needs.
	PublicKeyPEM string
}

// NewSigningKey makes a P-256 key with a random key ID (NewTeamID's form).
func NewSigningKey() (SigningKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return SigningKey{}, fmt.Errorf("apns-mock: making a P-256 key: %w", err)
	}
	private, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return SigningKey{}, fmt.Errorf("apns-mock: encoding the private key: %w", err)
	}
	public, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return SigningKey{}, fmt.Errorf("apns-mock: encoding the public key: %w", err)
	}
	return SigningKey{
		KeyID:         NewTeamID(),
		PrivateKey:    key,
		PrivateKeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: private})),
		PublicKeyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: public})),
	}, nil
}

// TestTeam is a team a test made for itself (NewTestTeam): its own key, apps, records and state
// on a mock other tests use at the same time. Close deletes it.
type TestTeam struct {
	TeamID string
	// KeyID, Key, KeyPEM: the team's signing key; sign provider tokens with iss TeamID, kid KeyID.
	KeyID  string
	Key    *ecdsa.PrivateKey
	KeyPEM string // PKCS #8 PEM, as a .p8 file holds it
	// Apps are the team's bundle IDs; Apps[0] is Topic().
	Apps []string
	// Admin is the admin client scoped to the team: its records, stats, devices, faults, clock.
	Admin *Client
	// View is the team as the mock answered its creation.
	View TeamView

	parent *Client
	once   sync.Once
	err    error
}

// Topic is the team's first app: a topic its key may push to.
func (t *TestTeam) Topic() string { return t.Apps[0] }

// NewTestTeam adds a team with a random team ID, a fresh P-256 key (environment any, every app)
// with a random key ID, and apps (each must belong to no other team; none given: one made from the
// team ID, "com.example.t" + its ID in lowercase). Delete it with Close, e.g.
//
//	team, err := mock.NewTestTeam(ctx, "com.example.worker1")
//	if err != nil {
//		t.Fatal(err)
//	}
//	t.Cleanup(func() { team.Close() })
func (c *Client) NewTestTeam(ctx context.Context, apps ...string) (*TestTeam, error) {
	key, err := NewSigningKey()
	if err != nil {
		return nil, err
	}
	teamID := NewTeamID()
	if len(apps) == 0 {
		apps = []string{"com.example.t" + strings.ToLower(teamID)}
	}
	unscoped := c.ForTeam("")
	view, err := unscoped.CreateTeam(ctx, Team{
		TeamID: teamID,
		Apps:   append([]string(nil), apps...),
		Keys:   []TeamKey{{KeyID: key.KeyID, PEM: key.PublicKeyPEM, Environment: "any"}},
	})
	if err != nil {
		return nil, err
	}
	return &TestTeam{
		TeamID: teamID, KeyID: key.KeyID, Key: key.PrivateKey, KeyPEM: key.PrivateKeyPEM,
		Apps: append([]string(nil), apps...), Admin: c.ForTeam(teamID), View: view, parent: unscoped,
	}, nil
}

// Close deletes the team (DELETE /v1/teams/{teamId}), within the client's timeout. A team already
// gone (404) is no error; a second Close returns the first one's result.
func (t *TestTeam) Close() error {
	t.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), t.parent.timeout+5*time.Second)
		defer cancel()
		err := t.parent.DeleteTeam(ctx, t.TeamID)
		var apiErr *Error
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
			err = nil
		}
		t.err = err
	})
	return t.err
}
