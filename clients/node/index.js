'use strict';
/**
 * apns-mock-client: a small client for apns-mock's admin API (docs/admin-api.md), for tests that
 * push with a real APNs client and then assert on what the mock received.
 *
 * Node's standard library only (`http`/`https`), CommonJS, Node 18 or later.
 *
 *   const { AdminClient } = require('apns-mock-client');
 *   const admin = new AdminClient({ url: process.env.MOCK_ADMIN_URL });
 *   await admin.reset();
 *   // … push with the code under test …
 *   const [record] = await admin.waitFor({ token }, { count: 1, timeout: 5 });
 *
 * A client made for one team (`new AdminClient({ url, team })`, `admin.forTeam(teamId)`) sends
 * `APNS-Mock-Team: <teamId>` with every call: records, stats, devices, faults, channels, the clock
 * and reset are then that team's only. `admin.createTemporaryTeam({ apps })` makes a team with a
 * fresh P-256 key for one test (or worker); `delete()` it afterwards.
 */
const crypto = require('crypto');
const http = require('http');
const https = require('https');

const DEFAULT_URL = 'http://127.0.0.1:2198';
const DEFAULT_TIMEOUT_MS = 10000;
/** The server's own default for `/v1/notifications/wait`'s `timeout`, in seconds. */
const DEFAULT_WAIT_SECONDS = 5;
/** The header that scopes an admin call to one team (the server also takes `?team=`). */
const TEAM_HEADER = 'apns-mock-team';
const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';

/**
 * A non-2xx answer. `message` is the server's `{"error": "…"}` text unchanged (for example
 * `advanceSeconds: expected a whole number …`); when the body holds no such text, the message names
 * the request and the status. `status` is the HTTP status, `body` the raw response text.
 */
class AdminError extends Error {
  constructor(message, { status, method, path, body }) {
    super(message);
    this.name = 'AdminError';
    this.status = status;
    this.method = method;
    this.path = path;
    this.body = body;
  }
}

/**
 * `waitFor` gave up: fewer than `expected` records matched within the timeout (the server's 408).
 * `matched` is how many did, `records` those records, `page` the whole 408 body.
 */
class WaitTimeoutError extends Error {
  constructor(page, expected, timeout) {
    const records = page.notifications || [];
    const seen = records.slice(-5).map(briefRecord).join('; ') || 'none';
    super(`waited ${timeout} s: ${records.length} of ${expected} matching notifications arrived; last seen: ${seen}`);
    this.name = 'WaitTimeoutError';
    this.status = 408;
    this.matched = records.length;
    this.expected = expected;
    this.records = records;
    this.page = page;
  }
}

/** One line about a record, for error messages: `#7 400 BadDeviceToken token=1f2e3d4c… topic=com.example.app`. */
function briefRecord(record) {
  const token = record.token ? `${String(record.token).slice(0, 8)}…` : null;
  const status = record.status === null ? `action=${record.action}` : record.status;
  return `#${record.seq} ${status} ${record.reason || '-'} token=${token} topic=${record.topic}`;
}

/** `?a=1&b=x` from an object, leaving out `undefined` and `null` values. */
function queryString(params) {
  const pairs = Object.entries(params || {}).filter(([, value]) => value !== undefined && value !== null);
  return pairs.length ? '?' + pairs.map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(String(value))}`).join('&') : '';
}

/** The filter with the options that are set added (an unset option leaves the filter's value). */
function withOptions(filter, options) {
  const query = { ...filter };
  for (const [key, value] of Object.entries(options)) if (value !== undefined) query[key] = value;
  return query;
}

class AdminClient {
  /**
   * @param {object} [options]
   * @param {string} [options.url] the admin base URL (default http://127.0.0.1:2198)
   * @param {string} [options.token] the admin token, sent as `Authorization: Bearer <token>`
   * @param {number} [options.timeoutMs] each request's timeout (default 10000); `waitFor` adds
   *   the wait's own timeout to it; `events` has none (close it, or abort its `signal`)
   * @param {string} [options.team] a team ID: every call is scoped to that team (sent as the
   *   `APNS-Mock-Team` header); without it calls act on the whole mock
   */
  constructor({ url = DEFAULT_URL, token, timeoutMs = DEFAULT_TIMEOUT_MS, team } = {}) {
    this.url = new URL(url);
    this.token = token;
    this.timeoutMs = timeoutMs;
    this.team = team || null;
  }

  /**
   * A client of the same mock (URL, admin token, timeout) scoped to the team `teamId`; `null`
   * gives an unscoped one. This client is left as it is.
   */
  forTeam(teamId) {
    return new AdminClient({ url: this.url.href, token: this.token, timeoutMs: this.timeoutMs, team: teamId });
  }

  /** Starts a request; `onResponse(res)` gets the response. Returns the `ClientRequest`. */
  _dial(method, path, { query, headers = {} } = {}, onResponse) {
    const base = this.url.pathname.replace(/\/+$/, '');
    const transport = this.url.protocol === 'https:' ? https : http;
    const allHeaders = { accept: 'application/json', ...headers };
    if (this.token) allHeaders.authorization = `Bearer ${this.token}`;
    if (this.team) allHeaders[TEAM_HEADER] = this.team;
    return transport.request(
      this.url, { method, path: base + path + queryString(query), headers: allHeaders }, onResponse);
  }

  /** One request, its whole answer read: `{status, headers, text}`. Rejects only when no answer came. */
  _request(method, path, { query, body, timeoutMs = this.timeoutMs } = {}) {
    const headers = {};
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    if (payload) Object.assign(headers, { 'content-type': 'application/json', 'content-length': payload.length });
    return new Promise((resolve, reject) => {
      const request = this._dial(method, path, { query, headers }, response => {
        const chunks = [];
        response.on('data', chunk => chunks.push(chunk));
        response.on('error', fail);
        response.on('close', () => response.complete || fail(new Error(`${method} ${path}: the connection closed mid-answer`)));
        response.on('end', () => {
          clearTimeout(timer);
          resolve({ status: response.statusCode, headers: response.headers, text: Buffer.concat(chunks).toString('utf8') });
        });
      });
      const timer = setTimeout(() => {
        const error = new Error(`${method} ${path}: no answer within ${timeoutMs} ms`);
        error.code = 'ETIMEDOUT';
        request.destroy(error);
      }, timeoutMs);
      function fail(error) {
        clearTimeout(timer);
        reject(error);
      }
      request.on('error', fail);
      request.end(payload);
    });
  }

  /** A request whose 2xx answer is JSON (or empty: `undefined`); anything else throws `AdminError`. */
  async _json(method, path, options) {
    const answer = await this._request(method, path, options);
    if (answer.status < 200 || answer.status > 299) throw adminError(method, path, answer);
    return answer.text === '' ? undefined : JSON.parse(answer.text);
  }

  /** A request whose 2xx answer is text. */
  async _text(method, path) {
    const answer = await this._request(method, path);
    if (answer.status < 200 || answer.status > 299) throw adminError(method, path, answer);
    return answer.text;
  }

  /** `GET /v1/health`: `{status: "ok", ports}` (`"degraded"` with `reason` while a shared state's database is unreachable); a 503 (starting, stopping) throws `AdminError`. */
  health() {
    return this._json('GET', '/v1/health');
  }

  /**
   * `GET /v1/notifications`: one page, `{notifications, next, more}`, oldest first.
   * @param {object} [filter] token, topic, pushType, apnsId, collapseId, outcome, reason, kind,
   *   channelId, since, limit (unset ones are left out)
   */
  listNotifications(filter = {}) {
    return this._json('GET', '/v1/notifications', { query: filter });
  }

  /**
   * `GET /v1/notifications/wait`: resolves to the records once `count` of them match `filter`;
   * rejects with `WaitTimeoutError` (carrying what matched) after `timeout` seconds.
   * @param {object} [filter] as `listNotifications`
   * @param {{count?: number, timeout?: number}} [options] count (default 1), timeout in seconds
   *   (default 5)
   */
  async waitFor(filter = {}, { count, timeout } = {}) {
    const query = withOptions(filter, { count, timeout });
    const path = '/v1/notifications/wait';
    const seconds = query.timeout === undefined || query.timeout === null ? DEFAULT_WAIT_SECONDS : Number(query.timeout);
    const answer = await this._request('GET', path, { query, timeoutMs: seconds * 1000 + this.timeoutMs });
    if (answer.status === 408) throw new WaitTimeoutError(JSON.parse(answer.text), Number(query.count || 1), seconds);
    if (answer.status !== 200) throw adminError('GET', path, answer);
    return JSON.parse(answer.text).notifications;
  }

  /** `DELETE /v1/notifications`: forgets every record. */
  async deleteNotifications() {
    await this._json('DELETE', '/v1/notifications');
  }

  /**
   * `GET /v1/events`: the event stream, as an async iterable of `{id, type, data}` (`type` is
   * `"message"` for a record, else `"skipped"` or `"refused-streams"`; `data` is parsed JSON; `id`
   * the `id:` line's text, or null). The request starts at once; `await stream.opened` resolves
   * once the server has subscribed it (records stored from then on are sent), or rejects with
   * `AdminError`. Leaving a `for await` loop (break, return, throw), `stream.close()` or aborting
   * `signal` closes the connection.
   * @param {object} [filter] as `listNotifications`
   * @param {{since?: number, limit?: number, maxRate?: number, lastEventId?: string|number,
   *   signal?: AbortSignal}} [options]
   * @returns {EventStream}
   */
  events(filter = {}, { since, limit, maxRate, lastEventId, signal } = {}) {
    const headers = { accept: 'text/event-stream' };
    if (lastEventId !== undefined && lastEventId !== null) headers['last-event-id'] = String(lastEventId);
    const query = withOptions(filter, { since, limit, maxRate });
    return new EventStream(onResponse => this._dial('GET', '/v1/events', { query, headers }, onResponse), signal);
  }

  /** `POST /v1/faults`: one rule (resolves to it, with its id) or an array (resolves to the array). */
  async addFault(ruleOrRules) {
    const created = await this._json('POST', '/v1/faults', { body: ruleOrRules });
    return Array.isArray(ruleOrRules) ? created.faults : created;
  }

  /** `GET /v1/faults`: the rules, with `remaining` and `applied`. */
  async listFaults() {
    return (await this._json('GET', '/v1/faults')).faults;
  }

  /** `DELETE /v1/faults/{id}`; an unknown id throws `AdminError` (404). */
  async removeFault(id) {
    await this._json('DELETE', `/v1/faults/${encodeURIComponent(id)}`);
  }

  /** `DELETE /v1/faults`: removes every rule. */
  async clearFaults() {
    await this._json('DELETE', '/v1/faults');
  }

  /** `POST /v1/devices` `{token, topic?, environment?, unregisteredAt?, reason?}`: the device. */
  registerDevice(device) {
    return this._json('POST', '/v1/devices', { body: device });
  }

  /** `GET /v1/devices`: `{policy, devices}`. */
  listDevices() {
    return this._json('GET', '/v1/devices');
  }

  /**
   * `POST /v1/devices/{token}/unregister`: from now on the token gets 410 with `reason`
   * (`Unregistered` default, or `ExpiredToken`) and `timestamp` (ms, RFC 3339 text or a Date;
   * default now). Resolves to the device.
   */
  unregisterDevice(token, { reason, timestamp } = {}) {
    const body = {};
    if (reason !== undefined) body.reason = reason;
    if (timestamp !== undefined) body.timestamp = timestamp instanceof Date ? timestamp.getTime() : timestamp;
    return this._json('POST', `/v1/devices/${encodeURIComponent(token)}/unregister`, { body });
  }

  /** `DELETE /v1/devices/{token}`; an unknown token throws `AdminError` (404). */
  async removeDevice(token) {
    await this._json('DELETE', `/v1/devices/${encodeURIComponent(token)}`);
  }

  /** `GET /v1/channels` (filter: bundleId, environment): the channels. */
  async listChannels(filter = {}) {
    return (await this._json('GET', '/v1/channels', { query: filter })).channels;
  }

  /** `POST /v1/channels` `{bundleId, environment?, channelId?, messageStoragePolicy?}`: the channel. */
  createChannel(channel) {
    return this._json('POST', '/v1/channels', { body: channel });
  }

  /** `DELETE /v1/channels/{channelId}` (the id percent-encoded); unknown: `AdminError` (404). */
  async deleteChannel(channelId) {
    await this._json('DELETE', `/v1/channels/${encodeURIComponent(channelId)}`);
  }

  /** `GET /v1/clock`: `{offsetSeconds, now, wallClock}`. */
  clock() {
    return this._json('GET', '/v1/clock');
  }

  /** `POST /v1/clock {"advanceSeconds": seconds}`: moves the mock's time ahead; the new clock. */
  advanceClock(seconds) {
    return this._json('POST', '/v1/clock', { body: { advanceSeconds: seconds } });
  }

  /** `POST /v1/reset`: records, devices, channels, faults, clock and tokens seen back to the start. */
  async reset() {
    await this._json('POST', '/v1/reset');
  }

  /** `GET /v1/stats`: the counters. */
  stats() {
    return this._json('GET', '/v1/stats');
  }

  /** `GET /v1/reasons`: `[{reason, status, explanation}]`. */
  async reasons() {
    return (await this._json('GET', '/v1/reasons')).reasons;
  }

  /** `GET /v1/ca.pem`: the CA certificate the mock's TLS listeners are issued under (PEM text). */
  caPem() {
    return this._text('GET', '/v1/ca.pem');
  }

  /** `GET /metrics`: Prometheus text. */
  metrics() {
    return this._text('GET', '/metrics');
  }

  /**
   * `POST /v1/teams` with a team `{teamId, apps, keys?, devices?}` (docs/admin-api.md): resolves
   * to the team as listed (`source: "api"`). A 400 names the field at fault; 409: the team ID, a
   * key ID or an app is taken.
   */
  createTeam(team) {
    return this._json('POST', '/v1/teams', { body: team });
  }

  /** `GET /v1/teams`: the teams, configured ones first, then those added, in order. */
  async listTeams() {
    return (await this._json('GET', '/v1/teams')).teams;
  }

  /**
   * `DELETE /v1/teams/{teamId}`: the team, its keys (its tokens are refused from now on), records,
   * devices, faults, channels and clock go. 404: unknown team; 409: a team of the configuration.
   */
  async deleteTeam(teamId) {
    await this._json('DELETE', `/v1/teams/${encodeURIComponent(teamId)}`);
  }

  /**
   * Creates a team of its own for one test (or test worker): `apps` (bundle IDs no other team
   * has), a fresh P-256 key made here (the mock gets its public half), a random team ID and key ID
   * unless given, `devices` (`{policy, tokens}`) when given, the key's `environment` (`any` by
   * default). Resolves to a `TemporaryTeam`; `await team.delete()` (or `await using`) deletes it.
   * @param {{apps: string[], devices?: object, environment?: string, teamId?: string, keyId?: string}} options
   */
  async createTemporaryTeam({ apps, devices, environment, teamId, keyId } = {}) {
    const appList = typeof apps === 'string' ? [apps] : apps;
    const owner = this.forTeam(null); // teams are made and deleted unscoped
    const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const privateKeyPem = privateKey.export({ type: 'pkcs8', format: 'pem' });
    const publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' });
    // A generated ID that happens to be taken (409) is drawn again; given ones are not.
    const attempts = teamId && keyId ? 1 : 3;
    for (let attempt = 1; ; attempt++) {
      const chosenTeam = teamId || randomId();
      const key = { keyId: keyId || randomId(), pem: publicKeyPem };
      if (environment !== undefined && environment !== null) key.environment = environment;
      const body = { teamId: chosenTeam, apps: appList, keys: [key] };
      if (devices !== undefined && devices !== null) body.devices = devices;
      try {
        const view = await owner.createTeam(body);
        return new TemporaryTeam(owner, view, key.keyId, privateKeyPem);
      } catch (error) {
        if (!(error instanceof AdminError && error.status === 409 && attempt < attempts)) throw error;
      }
    }
  }
}

/**
 * A team made by `AdminClient#createTemporaryTeam`: `teamId`, `keyId`, `privateKeyPem` (PKCS #8
 * PEM, as a `.p8` file holds it, for your APNs client), `apps`, `team` (the team as the mock listed
 * it) and `admin`, an `AdminClient` scoped to the team. `providerToken()` signs a token the mock
 * attributes to the team; `delete()` deletes the team (once; a team already gone counts as
 * deleted). Where the runtime has `Symbol.asyncDispose`, that method calls `delete()`, so
 * `await using team = await admin.createTemporaryTeam(…)` deletes it when the block ends.
 */
class TemporaryTeam {
  constructor(owner, team, keyId, privateKeyPem) {
    this._owner = owner;
    this.team = team;
    this.teamId = team.teamId;
    this.keyId = keyId;
    this.privateKeyPem = privateKeyPem;
    this.apps = Array.isArray(team.apps) ? [...team.apps] : [];
    this.admin = owner.forTeam(this.teamId);
    this.deleted = false;
  }

  /** An ES256 provider token of this team's key (`iss` the team, `kid` the key, `iat` now or `issuedAt`). */
  providerToken({ issuedAt } = {}) {
    return providerToken({ key: this.privateKeyPem, keyId: this.keyId, teamId: this.teamId, issuedAt });
  }

  /** `DELETE /v1/teams/{teamId}`, once; a 404 (already gone) counts as deleted. */
  async delete() {
    if (this.deleted) return;
    try {
      await this._owner.deleteTeam(this.teamId);
    } catch (error) {
      if (!(error instanceof AdminError && error.status === 404)) throw error;
    }
    this.deleted = true;
  }
}
if (typeof Symbol.asyncDispose === 'symbol') {
  TemporaryTeam.prototype[Symbol.asyncDispose] = function dispose() {
    return this.delete();
  };
}

/** A random team or key ID: 10 uppercase letters and digits, as Apple's are. */
function randomId() {
  let id = '';
  for (let i = 0; i < 10; i++) id += ID_ALPHABET[crypto.randomInt(ID_ALPHABET.length)];
  return id;
}

/**
 * An ES256 provider token: header `{"alg":"ES256","kid": keyId}`, claims `{"iss": teamId, "iat"}`
 * (`issuedAt` in whole seconds since the epoch, or a Date; now by default), signed with the P-256
 * private key `key` (PEM text, Buffer or KeyObject: a `.p8` file's contents), the signature as JOSE
 * wants it (r||s). Send it as `authorization: bearer <token>`.
 */
function providerToken({ key, keyId, teamId, issuedAt } = {}) {
  const keyObject = key instanceof crypto.KeyObject ? key : crypto.createPrivateKey(key);
  if (keyObject.asymmetricKeyType !== 'ec' || keyObject.asymmetricKeyDetails.namedCurve !== 'prime256v1') {
    throw new TypeError('providerToken: the key is not a P-256 (prime256v1) private key');
  }
  const seconds = issuedAt === undefined || issuedAt === null ? Date.now() / 1000
    : issuedAt instanceof Date ? issuedAt.getTime() / 1000 : Number(issuedAt);
  const part = value => Buffer.from(JSON.stringify(value)).toString('base64url');
  const input = `${part({ alg: 'ES256', kid: keyId })}.${part({ iss: teamId, iat: Math.floor(seconds) })}`;
  const signature = crypto.sign('sha256', Buffer.from(input), { key: keyObject, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}

/** The `AdminError` for a non-2xx answer. */
function adminError(method, path, { status, text }) {
  let message = null;
  try {
    const parsed = JSON.parse(text);
    if (parsed && typeof parsed.error === 'string') message = parsed.error;
  } catch (_) {
    // Not JSON: the text itself is shown below.
  }
  if (message === null) message = `${method} ${path} answered ${status}${text ? `: ${text.slice(0, 500)}` : ''}`;
  return new AdminError(message, { status, method, path, body: text });
}

/**
 * A `/v1/events` response as an async iterable of `{id, type, data}` (see `AdminClient#events`).
 * Events are parsed as they arrive and queued; the response is paused while 256 wait unread.
 */
class EventStream {
  constructor(dial, signal) {
    this.lastEventId = null;
    this._queue = [];
    this._done = false;
    this._error = null;
    this._wake = null;
    this._buffer = '';
    this._event = { id: null, type: null, data: [] };
    this.opened = new Promise((resolve, reject) => (this._opened = { resolve, reject }));
    this.opened.catch(() => {}); // the error also comes from next(): not an unhandled rejection
    this._request = dial(response => {
      this._response = response;
      response.setEncoding('utf8');
      if (response.statusCode !== 200) {
        let text = '';
        response.on('data', chunk => (text += chunk));
        response.on('end', () => this._finish(adminError('GET', '/v1/events', { status: response.statusCode, text })));
        return;
      }
      response.on('data', chunk => {
        this._opened.resolve(this); // the first chunk is the server's opening comment: it is subscribed
        try {
          this._parse(chunk);
        } catch (error) {
          this._finish(error); // data that is not JSON
          this._request.destroy();
        }
        if (this._queue.length >= 256) response.pause();
        this._notify();
      });
      response.on('end', () => this._finish(null));
      response.on('error', error => this._finish(error));
      response.on('close', () => this._finish(response.complete ? null : new Error('events: the connection closed')));
    });
    this._request.on('error', error => this._finish(error));
    this._request.end();
    if (signal) {
      const abort = () => {
        this._finish(signal.reason || Object.assign(new Error('events: aborted'), { name: 'AbortError' }));
        this._request.destroy();
      };
      if (signal.aborted) abort();
      else signal.addEventListener('abort', abort, { once: true });
      this._unlisten = () => signal.removeEventListener('abort', abort);
    }
  }

  /** Feeds text to the SSE parser: `field: value` lines, a blank line ends an event. */
  _parse(chunk) {
    this._buffer += chunk;
    const lines = this._buffer.split(/\r\n|\n|\r(?!$)/); // a last \r may be half of \r\n
    this._buffer = lines.pop(); // an incomplete last line waits for more
    for (const line of lines) {
      if (line === '') {
        const { id, type, data } = this._event;
        this._event = { id: null, type: null, data: [] };
        if (data.length === 0) continue; // the opening comment, keep-alives
        if (id !== null) this.lastEventId = id;
        this._queue.push({ id, type: type || 'message', data: JSON.parse(data.join('\n')) });
        continue;
      }
      if (line.startsWith(':')) continue; // a comment
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'data') this._event.data.push(value);
      else if (field === 'id') this._event.id = value;
      else if (field === 'event') this._event.type = value;
      // `retry` and unknown fields are ignored.
    }
  }

  _notify() {
    if (this._wake) {
      this._wake();
      this._wake = null;
    }
  }

  _finish(error) {
    if (this._done) return;
    this._done = true;
    this._error = error;
    if (error) this._opened.reject(error);
    else this._opened.resolve(this);
    if (this._unlisten) this._unlisten();
    this._notify();
  }

  /** The next event; `{done: true}` when the stream ended (server, `limit`, `close()`). */
  async next() {
    for (;;) {
      if (this._queue.length > 0) {
        const value = this._queue.shift();
        if (this._response && this._response.isPaused() && this._queue.length < 64) this._response.resume();
        return { value, done: false };
      }
      if (this._done) {
        if (this._error) throw this._error;
        return { value: undefined, done: true };
      }
      await new Promise(resolve => (this._wake = resolve));
    }
  }

  /** Closes the connection; called by `for await` when the loop is left. */
  async return() {
    this.close();
    return { value: undefined, done: true };
  }

  /** Closes the connection; iteration ends (events received but not yet taken are dropped). */
  close() {
    this._finish(null);
    this._queue = [];
    this._request.destroy();
  }

  [Symbol.asyncIterator]() {
    return this;
  }
}

module.exports = { AdminClient, AdminError, WaitTimeoutError, EventStream, TemporaryTeam, providerToken, randomId };
