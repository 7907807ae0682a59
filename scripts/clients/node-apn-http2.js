#!/usr/bin/env node
// Sends pushes through apns-mock with Node's built-in http2, the way node-apn
// (@parse/node-apn's lib/client.js) does: one http2.connect session per provider, opened with
// the provider's options (`port`, `ca`, and `cert`/`key` for certificate auth) on
// `https://${address}`; per push a stream with :authority = address, node-apn's headers
// (apns-priority 10, apns-expiration, apns-topic, apns-push-type), `authorization: bearer` with a
// jsonwebtoken-style ES256 token ({"alg","typ","kid"} / {"iat","iss"}), the JSON body written
// and the stream ended. Like node-apn it regenerates the token when APNs answers 403
// ExpiredProviderToken and retries on the same session (also after 408/429/5xx), up to
// connectionRetryLimit (3) times, and does not retry a refused stream.
//
// It is pointed at the mock through node-apn's own options: address "127.0.0.1", port, ca.
//
// Scenario "batch" sends to every --device at once, as node-apn's provider.send(note, [tokens])
// does (Promise.allSettled); every other scenario sends to the devices one after the other.
//
// Usage and output: as the Python drivers' (scripts/clients/driver_common.py), plus tokensSigned.
'use strict';

const crypto = require('crypto');
const fs = require('fs');
const http2 = require('http2');
const { parseArgs } = require('util');

const { values: args } = parseArgs({
  options: {
    port: { type: 'string' },
    ca: { type: 'string' },
    scenario: { type: 'string' },
    auth: { type: 'string', default: 'token' },
    key: { type: 'string' },
    team: { type: 'string' },
    'key-id': { type: 'string' },
    cert: { type: 'string' },
    'cert-key': { type: 'string' },
    topic: { type: 'string', default: 'com.example.app' },
    device: { type: 'string', multiple: true },
    timeout: { type: 'string', default: '30' },
  },
});

const timeout = setTimeout(() => {
  process.stderr.write('node-apn-http2: timed out\n');
  process.exit(2);
}, Number(args.timeout) * 1000);

const address = '127.0.0.1';
const retryStatusCodes = [408, 429, 500, 502, 503, 504];
const connectionRetryLimit = 3;
const requestTimeout = 5000;
const dialed = [];

function base64url(value) {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

// node-apn's prepareToken: a generation counter, the current token, regenerate(generation).
function prepareToken(keyPEM, keyId, teamId) {
  let signed = 0;
  const sign = () => {
    const input = `${base64url({ alg: 'ES256', typ: 'JWT', kid: keyId })}.${base64url({
      iat: Math.floor(Date.now() / 1000),
      iss: teamId,
    })}`;
    const signature = crypto.sign('sha256', Buffer.from(input), { key: keyPEM, dsaEncoding: 'ieee-p1363' });
    signed += 1;
    return `${input}.${signature.toString('base64url')}`;
  };
  return {
    generation: 0,
    current: sign(),
    regenerate(generation) {
      if (generation === this.generation) {
        this.generation += 1;
        this.current = sign();
      }
    },
    get signed() {
      return signed;
    },
  };
}

const config = { port: Number(args.port), ca: [fs.readFileSync(args.ca)] };
if (args.auth === 'certificate') {
  config.cert = fs.readFileSync(args.cert);
  config.key = fs.readFileSync(args['cert-key']);
} else {
  config.token = prepareToken(fs.readFileSync(args.key, 'utf8'), args['key-id'], args.team);
}

let session = null;
function connect() {
  if (session && !session.closed && !session.destroyed) return session;
  dialed.push(`${address}:${config.port}`);
  session = http2.connect(`https://${address}`, config);
  session.on('error', () => session.destroy());
  session.on('goaway', () => session.close());
  return session;
}

const notification = {
  headers: {
    'apns-priority': 10,
    'apns-expiration': Math.floor(Date.now() / 1000) + 3600,
    'apns-topic': args.topic,
    'apns-push-type': 'alert',
  },
  body: JSON.stringify({ aps: { alert: 'hello from node-apn-http2' } }),
};

// node-apn's Client.prototype.request: resolves with the apns-id on 2xx, rejects otherwise.
function request(device) {
  const headers = {
    ':scheme': 'https',
    ':method': 'POST',
    ':authority': address,
    ':path': `/3/device/${device}`,
    ...notification.headers,
  };
  let tokenGeneration = null;
  if (config.token) {
    headers.authorization = `bearer ${config.token.current}`;
    tokenGeneration = config.token.generation;
  }
  const stream = connect().request(headers);
  stream.setEncoding('utf8');
  let status = null;
  let apnsId = null;
  let data = '';
  stream.on('response', responseHeaders => {
    status = responseHeaders[':status'];
    apnsId = responseHeaders['apns-id'];
  });
  stream.on('data', chunk => (data += chunk));
  stream.write(notification.body);
  return new Promise((resolve, reject) => {
    stream.on('end', () => {
      if (status === 200) return resolve({ status, apnsId });
      if (status === null) return reject({ error: 'stream ended without a response' });
      let response = {};
      try {
        response = data === '' ? {} : JSON.parse(data);
      } catch (error) {
        return reject({ error: `unparsable body: ${data}` });
      }
      if (status === 403 && response.reason === 'ExpiredProviderToken') {
        config.token.regenerate(tokenGeneration);
      }
      reject({ status, apnsId, response });
    });
    stream.setTimeout(requestTimeout, () => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      reject({ error: 'apn write timeout' });
    });
    stream.on('error', error => reject({ error: `apn write failed: ${error.message}`, rstCode: stream.rstCode }));
    stream.end();
  });
}

// node-apn's Client.prototype.write + retryRequest.
async function write(device) {
  let attempt = 0;
  for (;;) {
    try {
      return await request(device);
    } catch (failure) {
      const retryable =
        retryStatusCodes.includes(failure.status) ||
        (failure.status === 403 && failure.response && failure.response.reason === 'ExpiredProviderToken');
      attempt += 1;
      if (!retryable || attempt > connectionRetryLimit) throw failure;
    }
  }
}

function outcome(device, settled) {
  if (settled.status === 'fulfilled') {
    const value = settled.value;
    return {
      device,
      sent: true,
      status: value.status,
      reason: null,
      apnsId: value.apnsId ?? null,
      timestamp: null,
      error: null,
      rstCode: null,
    };
  }
  const failure = settled.reason;
  return {
    device,
    sent: false,
    status: failure.status ?? null,
    reason: failure.response?.reason ?? null,
    apnsId: failure.apnsId ?? null,
    timestamp: failure.response?.timestamp ?? null,
    error: failure.error ?? null,
    // The RST_STREAM code of a stream the server reset (7: REFUSED_STREAM).
    rstCode: failure.rstCode ?? null,
  };
}

async function main() {
  const devices = args.device ?? [];
  let results;
  if (args.scenario === 'batch') {
    const settled = await Promise.allSettled(devices.map(device => write(device)));
    results = settled.map((entry, index) => outcome(devices[index], entry));
  } else {
    results = [];
    for (const device of devices) {
      const [entry] = await Promise.allSettled([write(device)]);
      results.push(outcome(device, entry));
    }
  }
  if (session) session.close();
  clearTimeout(timeout);
  process.stdout.write(
    JSON.stringify({
      client: 'node-apn-http2',
      version: `node ${process.version}`,
      scenario: args.scenario,
      dialed,
      results,
      tokensSigned: config.token ? config.token.signed : 0,
    }) + '\n'
  );
}

main().catch(error => {
  process.stderr.write(`node-apn-http2: ${error && error.stack ? error.stack : JSON.stringify(error)}\n`);
  process.exit(2);
});
