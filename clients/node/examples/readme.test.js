'use strict';
// Push with Node's http2 (as node-apn does), then ask apns-mock what it received.
const test = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const fs = require('node:fs');
const http2 = require('node:http2');
const { once } = require('node:events');
const { AdminClient } = require('apns-mock-client');

const env = process.env;
const admin = new AdminClient({ url: env.MOCK_ADMIN_URL });

// The code under test: one alert push with an ES256 provider token.
async function sendWelcome(token) {
  const part = value => Buffer.from(JSON.stringify(value)).toString('base64url');
  const input = `${part({ alg: 'ES256', kid: env.MOCK_KEY_ID })}.${part({ iss: env.MOCK_TEAM_ID, iat: Math.floor(Date.now() / 1000) })}`;
  const signature = crypto.sign('sha256', Buffer.from(input), { key: fs.readFileSync(env.MOCK_KEY_FILE), dsaEncoding: 'ieee-p1363' });
  const session = http2.connect(env.MOCK_APNS_URL, { ca: fs.readFileSync(env.MOCK_CA_FILE) });
  try {
    const stream = session.request({
      ':method': 'POST', ':path': `/3/device/${token}`, authorization: `bearer ${input}.${signature.toString('base64url')}`,
      'apns-topic': env.MOCK_TOPIC, 'apns-push-type': 'alert', 'apns-priority': '10',
    });
    stream.end(JSON.stringify({ aps: { alert: { title: 'Welcome', body: 'Thanks for signing up' } } }));
    const [headers] = await once(stream, 'response', { signal: AbortSignal.timeout(10000) });
    return headers[':status'];
  } finally {
    session.destroy();
  }
}

test('the welcome push reaches the device', { timeout: 20000 }, async () => {
  await admin.reset();
  const token = crypto.randomBytes(32).toString('hex');
  assert.equal(await sendWelcome(token), 200);

  const [record] = await admin.waitFor({ token }, { count: 1, timeout: 5 });
  assert.equal(record.payload.aps.alert.title, 'Welcome');
  assert.equal(record.headers['apns-push-type'], 'alert');
});
