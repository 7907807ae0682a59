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
//
// Broadcast push (--steps JSON): channel management and broadcasts the way node-apn 7.1 sends them
// (lib/provider.js manageChannels/broadcast, lib/client.js, lib/notification/index.js); see
// broadcastMain below.
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
    // Broadcast push only.
    steps: { type: 'string' },
    'manage-port': { type: 'string' },
    bundle: { type: 'string', default: 'com.example.app' },
    hosts: { type: 'string', default: 'address' },
    environment: { type: 'string', default: 'sandbox' },
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

// ---------------------------------------------------------------------------------------------
// Broadcast push, as node-apn 7.1 sends it.
//
// - Channel management (`provider.manageChannels(note, bundleId, action)`) goes over a second
//   session to `manageChannelsAddress`:`manageChannelsPort` (node-apn's defaults:
//   api-manage-broadcast[.sandbox].push.apple.com, 2195 sandbox / 2196 production); broadcasts
//   (`provider.broadcast(note, bundleId)`) over the ordinary session to `address`.
// - Headers come from the Notification: `apns-priority` (10 unless set; on management requests
//   node-apn forces 10), `apns-expiration` only when `expiry` >= 0 (default -1: none),
//   `apns-request-id`, `apns-channel-id`, `apns-push-type`, `apns-topic` (cleared for management).
// - Create adds `"push-type": "liveactivity"` to the payload unless the caller set one; a body of
//   `{}` is not written (GET and DELETE end the stream with their HEADERS, as Node does for them).
// - 200, 201 and 204 are success: the result holds the response's apns-request-id,
//   apns-channel-id, apns-unique-id and apns-id and the JSON body's members, but no status. A
//   failure holds status and `response` ({reason}), or `error` for 403 ExpiredProviderToken (after
//   which the token is re-signed and the request retried on the same session, as for
//   408/429/5xx, up to connectionRetryLimit times).
//
// Pointed at the mock with node-apn's options: --hosts address gives address and
// manageChannelsAddress "127.0.0.1"; --hosts apple leaves them to node-apn's defaults for
// --environment (`production: true` for production) and passes a `lookup` option (node-apn hands
// its options to http2.connect, which hands them to net) resolving them to 127.0.0.1. port and
// manageChannelsPort are the mock's.
//
// --steps is a JSON array run in order, each step one provider call:
//   {"op":"create","policy":0|1[,"payload":{…}][,"requestId":…]}  note.payload = payload or
//       {"message-storage-policy": policy}
//   {"op":"read"|"delete"[,"channel":…]}   note.channelId = channel, or the last created one
//   {"op":"readAll"}
//   {"op":"broadcast"[,"channel":…][,"expiry":N][,"priority":N]}  note.pushType = "liveactivity",
//       an update payload; note.expiry only when given
// It prints {"client","version","scenario","dialed","tokensSigned","steps":[{op, ok (the result
// was in `sent`), status, reason, error, requestId, channelId, uniqueId, apnsId, policy,
// pushType, channels}]}: what the provider's result shows, null where it shows nothing.

// node-apn's lib/notification/index.js, the parts channel requests use.
class Notification {
  constructor() {
    this.payload = {};
    this.aps = {};
    this.compiled = false;
    this.expiry = -1;
    this.priority = 10;
  }

  headers() {
    const headers = {};
    if (Number.isInteger(this.priority)) headers['apns-priority'] = this.priority;
    if (this.id) headers['apns-id'] = this.id;
    if (this.collapseId) headers['apns-collapse-id'] = this.collapseId;
    if (this.requestId) headers['apns-request-id'] = this.requestId;
    if (this.channelId) headers['apns-channel-id'] = this.channelId;
    if (this.expiry >= 0) headers['apns-expiration'] = this.expiry;
    if (this.topic) headers['apns-topic'] = this.topic;
    if (this.pushType) headers['apns-push-type'] = this.pushType;
    return headers;
  }

  removeNonChannelRelatedProperties() {
    this.priority = 10;
    this.id = undefined;
    this.collapseId = undefined;
    this.topic = undefined;
    this.pushType = undefined;
  }

  addPushTypeToPayloadIfNeeded() {
    if (this.rawPayload == undefined && this.payload['push-type'] == undefined) {
      this.payload['push-type'] = 'liveactivity';
    }
  }

  compile() {
    if (!this.compiled) this.compiled = JSON.stringify(this);
    return this.compiled;
  }

  toJSON() {
    const aps = Object.keys(this.aps).find(key => this.aps[key] !== undefined) ? this.aps : undefined;
    return { ...this.payload, aps };
  }
}

function channelConfig() {
  const production = args.environment === 'production';
  const broadcastConfig = {
    ...config,
    production,
    manageChannelsPort: Number(args['manage-port']),
    connectionRetryLimit,
    requestTimeout,
  };
  if (args.hosts === 'apple') {
    // node-apn's lib/config.js defaults.
    broadcastConfig.address = production ? 'api.push.apple.com' : 'api.sandbox.push.apple.com';
    broadcastConfig.manageChannelsAddress = production
      ? 'api-manage-broadcast.push.apple.com'
      : 'api-manage-broadcast.sandbox.push.apple.com';
    broadcastConfig.lookup = (hostname, options, callback) =>
      options && options.all ? callback(null, [{ address: '127.0.0.1', family: 4 }]) : callback(null, '127.0.0.1', 4);
  } else {
    broadcastConfig.address = address;
    broadcastConfig.manageChannelsAddress = address;
  }
  return broadcastConfig;
}

// node-apn's lib/client.js: two sessions, makePath, request, write, retryRequest.
function makeChannelClient(clientConfig) {
  const sessions = { apns: null, manage: null };
  const retryStatusCodes = [408, 429, 500, 502, 503, 504];
  const HTTPMethod = {
    post: http2.constants.HTTP2_METHOD_POST,
    get: http2.constants.HTTP2_METHOD_GET,
    delete: http2.constants.HTTP2_METHOD_DELETE,
  };

  function connect(kind) {
    const existing = sessions[kind];
    if (existing && !existing.closed && !existing.destroyed) return existing;
    const sessionConfig = { ...clientConfig };
    if (kind === 'manage') {
      sessionConfig.address = clientConfig.manageChannelsAddress;
      sessionConfig.port = clientConfig.manageChannelsPort;
    }
    dialed.push(`${sessionConfig.address}:${sessionConfig.port}`);
    const session = http2.connect(`https://${sessionConfig.address}`, sessionConfig);
    session.on('error', () => session.destroy());
    session.on('goaway', () => session.close());
    sessions[kind] = session;
    return session;
  }

  function makePath(type, bundleId) {
    switch (type) {
      case 'channels':
        return `/1/apps/${bundleId}/channels`;
      case 'allChannels':
        return `/1/apps/${bundleId}/all-channels`;
      case 'broadcasts':
        return `/4/broadcasts/apps/${bundleId}`;
      default:
        return null;
    }
  }

  function headerObject(uniqueId, requestId, channelId, notificationId) {
    const header = {};
    if (uniqueId) header['apns-unique-id'] = uniqueId;
    if (requestId) header['apns-request-id'] = requestId;
    if (channelId) header['apns-channel-id'] = channelId;
    if (notificationId) header['apns-id'] = notificationId;
    return header;
  }

  function request(session, authority, built, path, method) {
    let tokenGeneration = null;
    let status = null;
    let uniqueId = null;
    let requestId = null;
    let channelId = null;
    let notificationId = null;
    let data = '';
    const headers = {
      ':scheme': 'https',
      ':method': method,
      ':authority': authority,
      ':path': path,
      ...built.headers,
    };
    if (clientConfig.token) {
      headers.authorization = `bearer ${clientConfig.token.current}`;
      tokenGeneration = clientConfig.token.generation;
    }
    const stream = session.request(headers);
    stream.setEncoding('utf8');
    stream.on('response', responseHeaders => {
      status = responseHeaders[':status'];
      uniqueId = responseHeaders['apns-unique-id'];
      requestId = responseHeaders['apns-request-id'];
      channelId = responseHeaders['apns-channel-id'];
      notificationId = responseHeaders['apns-id'];
    });
    stream.on('data', chunk => (data += chunk));
    if (built.body !== '{}') stream.write(built.body);
    return new Promise((resolve, reject) => {
      stream.on('end', () => {
        try {
          const header = headerObject(uniqueId, requestId, channelId, notificationId);
          if (status === 200 || status === 201 || status === 204) {
            resolve({ ...header, ...(data !== '' ? JSON.parse(data) : {}) });
          } else if (data !== '') {
            const response = JSON.parse(data);
            if (status === 403 && response.reason === 'ExpiredProviderToken') {
              // With certificate auth there is no token: node-apn throws here, and the catch
              // below turns it into an error.
              clientConfig.token.regenerate(tokenGeneration);
              reject({ ...header, status, error: new Error(response.reason) });
            } else if (status === 500 && response.reason === 'InternalServerError') {
              reject({ ...header, status, error: new Error('Error 500, stream ended unexpectedly') });
            } else {
              reject({ ...header, status, response });
            }
          } else {
            reject({ ...header, error: new Error(`stream ended unexpectedly with status ${status} and empty body`) });
          }
        } catch (error) {
          reject({ error: new Error(`Unexpected error processing APNs response: ${error.message}`) });
        }
      });
      stream.setTimeout(clientConfig.requestTimeout, () => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        reject({ error: new Error('apn write timeout') });
      });
      stream.on('aborted', () => reject({ error: new Error('apn write aborted') }));
      stream.on('error', error => reject({ error: new Error(`apn write failed: ${error.message}`) }));
      stream.end();
    });
  }

  async function retryRequest(error, session, authority, built, path, method, count) {
    if (session.closed) throw { error: new Error('client session is either closed or destroyed') };
    const retryCount = count + 1;
    if (retryCount > clientConfig.connectionRetryLimit) throw error;
    await new Promise(resolve => setTimeout(resolve, parseInt(error.retryAfter || 0) * 1000));
    try {
      return await request(session, authority, built, path, method);
    } catch (failure) {
      return await retryRequest(failure, session, authority, built, path, method, retryCount);
    }
  }

  async function write(built, bundleId, type, httpMethod) {
    const label = { bundleId };
    const path = makePath(type, bundleId);
    const method = HTTPMethod[httpMethod];
    const manage = path.includes('/1/apps/');
    const session = connect(manage ? 'manage' : 'apns');
    const authority = manage ? clientConfig.manageChannelsAddress : clientConfig.address;
    try {
      return { ...label, ...(await request(session, authority, built, path, method)) };
    } catch (error) {
      const expired =
        typeof error.error !== 'undefined' && error.status == 403 && error.error.message === 'ExpiredProviderToken';
      if (retryStatusCodes.includes(error.status) || expired) {
        try {
          return { ...label, ...(await retryRequest(error, session, authority, built, path, method, 0)) };
        } catch (failure) {
          if (failure.status == 500) session.close();
          delete failure.retryAfter;
          throw { ...label, ...failure };
        }
      }
      delete error.retryAfter;
      throw { ...label, ...error };
    }
  }

  function close() {
    for (const session of Object.values(sessions)) if (session && !session.closed) session.close();
  }

  return { write, close };
}

// node-apn's lib/provider.js: manageChannels and broadcast, each settling into {sent, failed}.
function makeProvider(client) {
  async function settle(promise) {
    const [settled] = await Promise.allSettled([promise]);
    const sent = [];
    const failed = [];
    if (settled.status === 'fulfilled') {
      const value = settled.value;
      if (value.status || value.error) failed.push(value);
      else sent.push(value);
    } else {
      failed.push(settled.reason);
    }
    return { sent, failed };
  }

  const actions = {
    create: ['channels', 'post'],
    read: ['channels', 'get'],
    readAll: ['allChannels', 'get'],
    delete: ['channels', 'delete'],
  };

  return {
    manageChannels(notification, bundleId, action) {
      const [type, method] = actions[action];
      if (action === 'create') notification.addPushTypeToPayloadIfNeeded();
      notification.removeNonChannelRelatedProperties();
      const built = { headers: notification.headers(), body: notification.compile() };
      return settle(client.write(built, bundleId, type, method));
    },
    broadcast(notification, bundleId) {
      const built = { headers: notification.headers(), body: notification.compile() };
      return settle(client.write(built, bundleId, 'broadcasts', 'post'));
    },
  };
}

function stepReport(op, { sent, failed }) {
  const ok = sent.length === 1;
  const result = ok ? sent[0] : failed[0];
  const error = result.error;
  return {
    op,
    ok,
    status: result.status ?? null,
    reason: result.response?.reason ?? null,
    error: error ? (error.message ?? String(error)) : null,
    requestId: result['apns-request-id'] ?? null,
    channelId: result['apns-channel-id'] ?? null,
    uniqueId: result['apns-unique-id'] ?? null,
    apnsId: result['apns-id'] ?? null,
    policy: result['message-storage-policy'] ?? null,
    pushType: result['push-type'] ?? null,
    channels: result.channels ?? null,
  };
}

async function broadcastMain() {
  const clientConfig = channelConfig();
  const client = makeChannelClient(clientConfig);
  const provider = makeProvider(client);
  const bundleId = args.bundle;
  let created = null;
  const steps = [];
  for (const step of JSON.parse(args.steps)) {
    const note = new Notification();
    let outcome;
    switch (step.op) {
      case 'create':
        if (step.requestId) note.requestId = step.requestId;
        note.payload = step.payload ?? { 'message-storage-policy': step.policy };
        outcome = await provider.manageChannels(note, bundleId, 'create');
        break;
      case 'read':
      case 'delete':
        note.channelId = step.channel ?? created;
        outcome = await provider.manageChannels(note, bundleId, step.op);
        break;
      case 'readAll':
        outcome = await provider.manageChannels(note, bundleId, 'readAll');
        break;
      case 'broadcast':
        note.channelId = step.channel ?? created;
        note.pushType = 'liveactivity';
        if (step.expiry !== undefined) note.expiry = step.expiry;
        if (step.priority !== undefined) note.priority = step.priority;
        // What node-apn's setters write: note.timestamp, note.event, note.contentState.
        note.aps = { timestamp: Math.floor(Date.now() / 1000), event: 'update', 'content-state': { score: '1-0' } };
        outcome = await provider.broadcast(note, bundleId);
        break;
      default:
        throw new Error(`unknown step ${JSON.stringify(step)}`);
    }
    const report = stepReport(step.op, outcome);
    if (step.op === 'create' && report.ok) created = report.channelId;
    steps.push(report);
  }
  client.close();
  clearTimeout(timeout);
  process.stdout.write(
    JSON.stringify({
      client: 'node-apn-http2',
      version: `node ${process.version}`,
      scenario: args.scenario ?? null,
      dialed,
      tokensSigned: config.token ? config.token.signed : 0,
      steps,
    }) + '\n'
  );
}

(args.steps ? broadcastMain() : main()).catch(error => {
  process.stderr.write(`node-apn-http2: ${error && error.stack ? error.stack : JSON.stringify(error)}\n`);
  process.exit(2);
});
