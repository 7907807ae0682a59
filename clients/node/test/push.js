'use strict';
// Pushes the way node-apn does: Node's http2 session to MOCK_APNS_URL trusting MOCK_CA_FILE, a
// POST /3/device/<token> stream with apns-topic, apns-push-type, apns-priority and a bearer ES256
// provider token (JOSE r||s signature, as crypto.sign's ieee-p1363 encoding gives it).
// (node --test also runs this file as a test file: it defines no tests.)
const crypto = require('node:crypto');
const fs = require('node:fs');
const http2 = require('node:http2');

const env = name => {
  if (!process.env[name]) throw new Error(`${name} is not set: run the tests with scripts/client-tests node`);
  return process.env[name];
};

/** A provider token the mock accepts: {"alg":"ES256","kid"} / {"iss","iat"}. */
function providerToken() {
  const part = value => Buffer.from(JSON.stringify(value)).toString('base64url');
  const input = `${part({ alg: 'ES256', kid: env('MOCK_KEY_ID') })}.${part({
    iss: env('MOCK_TEAM_ID'),
    iat: Math.floor(Date.now() / 1000),
  })}`;
  const signature = crypto.sign('sha256', Buffer.from(input), {
    key: fs.readFileSync(env('MOCK_KEY_FILE')),
    dsaEncoding: 'ieee-p1363',
  });
  return `${input}.${signature.toString('base64url')}`;
}

/** A random 64-hex device token. */
function deviceToken() {
  return crypto.randomBytes(32).toString('hex');
}

/**
 * One push on a session of its own: resolves to {status, apnsId, body} (body parsed when there is
 * one). Gives up after 10 s. With `team` (a TemporaryTeam) the token is signed with that team's key
 * and the topic is its first app unless given; else the mock's key (MOCK_KEY_*) and MOCK_TOPIC.
 * `jwt` sends that provider token instead; on `session` (from `connect()`) the push shares that
 * connection and leaves it open.
 */
function push(token, { title = 'Hello', body = 'from the node client tests', team, topic, jwt, session: shared } = {}) {
  if (topic === undefined) topic = team ? team.apps[0] : env('MOCK_TOPIC');
  const authorization = `bearer ${jwt || (team ? team.providerToken() : providerToken())}`;
  return new Promise((resolve, reject) => {
    const session = shared || connect();
    const fail = error => {
      if (!shared) session.destroy();
      reject(error);
    };
    if (!shared) session.on('error', fail);
    const stream = session.request({
      ':method': 'POST',
      ':path': `/3/device/${token}`,
      'apns-topic': topic,
      'apns-push-type': 'alert',
      'apns-priority': '10',
      authorization,
    });
    let headers = null;
    let text = '';
    stream.setEncoding('utf8');
    stream.on('response', responseHeaders => (headers = responseHeaders));
    stream.on('data', chunk => (text += chunk));
    stream.on('error', fail);
    stream.setTimeout(10000, () => fail(new Error(`push to ${token}: no answer within 10 s`)));
    stream.on('end', () => {
      if (!shared) session.close();
      if (!headers) return reject(new Error(`push to ${token}: the stream ended without a response`));
      resolve({ status: headers[':status'], apnsId: headers['apns-id'], body: text ? JSON.parse(text) : null });
    });
    stream.end(JSON.stringify({ aps: { alert: { title, body } } }));
  });
}

/** An HTTP/2 session to MOCK_APNS_URL trusting MOCK_CA_FILE, for several pushes on one connection. */
function connect() {
  return http2.connect(env('MOCK_APNS_URL'), { ca: fs.readFileSync(env('MOCK_CA_FILE')) });
}

module.exports = { push, connect, deviceToken, providerToken };
