'use strict';
// What the live mock cannot show (it runs without an admin token): the client against a small
// local HTTP server that records what it was sent and answers what each test scripts.
const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { once } = require('node:events');
const crypto = require('node:crypto');
const { AdminClient, AdminError, TemporaryTeam, providerToken, randomId } = require('..');

let answer = (request, response) => response.end();
const seen = [];
const server = http.createServer((request, response) => {
  const chunks = [];
  request.on('data', chunk => chunks.push(chunk));
  request.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8');
    seen.push({ method: request.method, url: request.url, headers: request.headers, body: text ? JSON.parse(text) : undefined });
    answer(request, response);
  });
});
const listening = once(server.listen(0, '127.0.0.1'), 'listening');
after(() => server.close());

async function client(options = {}) {
  await listening;
  seen.length = 0;
  return new AdminClient({ url: `http://127.0.0.1:${server.address().port}/prefix/`, ...options });
}

test('the token, a base path, encoded queries and path parts', { timeout: 10000 }, async () => {
  const admin = await client({ token: 's3cret' });
  answer = (request, response) => response.end('{"notifications":[],"next":0,"more":false}');
  await admin.listNotifications({ token: 'a b', channelId: 'x/y+z=', since: 3, limit: undefined, topic: null });
  assert.equal(seen[0].url, '/prefix/v1/notifications?token=a%20b&channelId=x%2Fy%2Bz%3D&since=3');
  assert.equal(seen[0].headers.authorization, 'Bearer s3cret');
  await admin.waitFor({ since: 4, count: 3 }, { count: 1 });
  assert.equal(seen[1].url, '/prefix/v1/notifications/wait?since=4&count=1', 'set options win, unset ones keep the filter\'s');
  answer = (request, response) => (response.statusCode = 204, response.end());
  await admin.deleteChannel('ab/c+d==');
  assert.equal(seen[2].url, '/prefix/v1/channels/ab%2Fc%2Bd%3D%3D');
  assert.equal(seen[2].method, 'DELETE');
});

test('an answer without {"error"} still becomes an AdminError', { timeout: 10000 }, async () => {
  const admin = await client();
  answer = (request, response) => (response.statusCode = 502, response.end('<html>bad gateway</html>'));
  const error = await admin.stats().catch(e => e);
  assert.ok(error instanceof AdminError);
  assert.equal(error.status, 502);
  assert.equal(error.message, 'GET /v1/stats answered 502: <html>bad gateway</html>');
});

test('a request that gets no answer times out', { timeout: 10000 }, async () => {
  const admin = await client({ timeoutMs: 200 });
  answer = () => {}; // never answers
  const error = await admin.clock().catch(e => e);
  assert.equal(error.code, 'ETIMEDOUT');
});

test('the event stream parser: comments, retry, CRLF, several data lines, split chunks', { timeout: 10000 }, async () => {
  const admin = await client();
  let closed;
  answer = (request, response) => {
    closed = once(request.socket, 'close');
    response.writeHead(200, { 'content-type': 'text/event-stream' });
    response.write(': apns-mock events\nretry: 2000\n\n');
    response.write('id: 7\ndata: {"seq":7,\r\ndata: "token":"ab"}\r\n\r');
    response.write('\nevent: skipped\ndata: {"skipped":2,"firstSeq":8,');
    setTimeout(() => response.write('"lastSeq":9}\n\n: keep-alive\n\nid: 10\ndata: {"seq":10}\n\n'), 20);
  };
  const stream = admin.events({ outcome: 'all' }, { lastEventId: 6, signal: AbortSignal.timeout(5000) });
  const events = [];
  for await (const event of stream) {
    events.push(event);
    if (events.length === 3) break;
  }
  assert.deepEqual(events, [
    { id: '7', type: 'message', data: { seq: 7, token: 'ab' } },
    { id: null, type: 'skipped', data: { skipped: 2, firstSeq: 8, lastSeq: 9 } },
    { id: '10', type: 'message', data: { seq: 10 } },
  ]);
  assert.equal(stream.lastEventId, '10');
  assert.equal(seen[0].url, '/prefix/v1/events?outcome=all');
  assert.equal(seen[0].headers['last-event-id'], '6');
  assert.equal(seen[0].headers.accept, 'text/event-stream');
  await closed; // leaving the loop closed the connection
});

// Teams.

/** Answers each request with `routes[method + ' ' + path-without-query]`: [status, body object or undefined]. */
function route(routes) {
  return (request, response) => {
    const [status, body] = routes[`${request.method} ${request.url.split('?')[0]}`] || [200, {}];
    response.statusCode = status;
    response.end(body === undefined ? '' : JSON.stringify(body));
  };
}

const ID = /^[A-Z0-9]{10}$/;

test('a client for a team sends APNS-Mock-Team on every call; forTeam keeps the rest', { timeout: 10000 }, async () => {
  const unscoped = await client({ token: 's3cret', timeoutMs: 3000 });
  answer = route({ 'GET /prefix/v1/notifications': [200, { notifications: [], next: 0, more: false }] });
  const scoped = new AdminClient({ url: unscoped.url.href, team: 'TEAM000001' });
  const derived = unscoped.forTeam('TEAM000002');
  assert.equal(unscoped.team, null);
  assert.equal(derived.team, 'TEAM000002');
  assert.equal(derived.url.href, unscoped.url.href);
  assert.equal(derived.token, 's3cret');
  assert.equal(derived.timeoutMs, 3000);
  assert.equal(derived.forTeam(null).team, null);

  await unscoped.listNotifications({ token: 'ab' });
  await scoped.listNotifications({ token: 'ab' });
  await scoped.reset();
  await derived.addFault({ respond: { reason: 'BadDeviceToken' } });
  await derived.advanceClock(5);
  const stream = derived.events({}, { limit: 0 });
  await stream.opened.catch(() => {});
  stream.close();
  assert.deepEqual(seen.map(request => request.headers['apns-mock-team']),
    [undefined, 'TEAM000001', 'TEAM000001', 'TEAM000002', 'TEAM000002', 'TEAM000002']);
  assert.equal(seen[1].url, '/prefix/v1/notifications?token=ab');
  assert.equal(seen[0].headers.authorization, 'Bearer s3cret');
  assert.equal(seen[3].headers.authorization, 'Bearer s3cret');
});

test('createTeam, listTeams and deleteTeam', { timeout: 10000 }, async () => {
  const admin = await client();
  const body = { teamId: 'TEAM000001', apps: ['com.example.one'], keys: [{ keyId: 'KEY0000001', pem: '-----BEGIN PUBLIC KEY-----\n…' }] };
  const view = { teamId: 'TEAM000001', apps: ['com.example.one'], keys: [], devices: { policy: null, count: 0 }, source: 'api' };
  answer = route({
    'POST /prefix/v1/teams': [201, view],
    'GET /prefix/v1/teams': [200, { teams: [view] }],
    'DELETE /prefix/v1/teams/TEAM000001': [204],
    'DELETE /prefix/v1/teams/NOSUCHTEAM': [404, { error: 'team: NOSUCHTEAM is not a team of this mock (GET /v1/teams lists them)' }],
  });
  assert.deepEqual(await admin.createTeam(body), view);
  assert.equal(seen[0].method, 'POST');
  assert.deepEqual(seen[0].body, body);
  assert.deepEqual(await admin.listTeams(), [view]);
  assert.equal(await admin.deleteTeam('TEAM000001'), undefined);
  assert.equal(seen[2].method, 'DELETE');
  assert.equal(seen[2].url, '/prefix/v1/teams/TEAM000001');
  const error = await admin.deleteTeam('NOSUCHTEAM').catch(e => e);
  assert.ok(error instanceof AdminError);
  assert.equal(error.status, 404);
  assert.match(error.message, /^team: NOSUCHTEAM /);
});

test('createTemporaryTeam sends the public half of a fresh key and delete() deletes the team once', { timeout: 10000 }, async () => {
  const admin = (await client()).forTeam('OTHERTEAM1'); // teams are made and deleted unscoped all the same
  answer = route({
    'POST /prefix/v1/teams': [201, { teamId: 'PLACEHOLDR', apps: ['com.example.one'], source: 'api' }],
    'DELETE /prefix/v1/teams/PLACEHOLDR': [204],
  });
  const team = await admin.createTemporaryTeam({ apps: ['com.example.one'], devices: { policy: 'registered' } });
  assert.ok(team instanceof TemporaryTeam);
  const sent = seen[0].body;
  assert.deepEqual(Object.keys(sent).sort(), ['apps', 'devices', 'keys', 'teamId']);
  assert.deepEqual(sent.apps, ['com.example.one']);
  assert.deepEqual(sent.devices, { policy: 'registered' });
  assert.match(sent.teamId, ID);
  const [key] = sent.keys;
  assert.deepEqual(Object.keys(key).sort(), ['keyId', 'pem'], 'the environment is left to the server (any)');
  assert.match(key.keyId, ID);
  assert.match(key.pem, /^-----BEGIN PUBLIC KEY-----\n/);
  assert.match(team.privateKeyPem, /^-----BEGIN PRIVATE KEY-----\n/, 'PKCS #8, as a .p8 file');
  const publicHalf = crypto.createPublicKey(crypto.createPrivateKey(team.privateKeyPem)).export({ type: 'spki', format: 'pem' });
  assert.equal(publicHalf, key.pem);
  assert.equal(team.keyId, key.keyId);
  assert.equal(team.teamId, 'PLACEHOLDR', 'the server\'s answer names the team');
  assert.deepEqual(team.apps, ['com.example.one']);
  assert.equal(team.admin.team, 'PLACEHOLDR');
  assert.equal(seen[0].headers['apns-mock-team'], undefined);
  await team.admin.stats();
  assert.equal(seen[1].headers['apns-mock-team'], 'PLACEHOLDR');

  await team.delete();
  assert.equal(seen[2].method, 'DELETE');
  assert.equal(seen[2].url, '/prefix/v1/teams/PLACEHOLDR');
  assert.equal(seen[2].headers['apns-mock-team'], undefined);
  assert.equal(team.deleted, true);
  await team.delete();
  assert.equal(seen.length, 3, 'deleted once');
  if (typeof Symbol.asyncDispose === 'symbol') assert.equal(typeof team[Symbol.asyncDispose], 'function');
});

test('createTemporaryTeam takes given IDs and environment; a 404 on delete counts as deleted', { timeout: 10000 }, async () => {
  const admin = await client();
  answer = route({
    'POST /prefix/v1/teams': [201, { teamId: 'ABCDE12345', apps: ['com.example.two'] }],
    'DELETE /prefix/v1/teams/ABCDE12345': [404, { error: 'team: ABCDE12345 is not a team of this mock' }],
  });
  const team = await admin.createTemporaryTeam({ apps: 'com.example.two', teamId: 'ABCDE12345', keyId: 'KEY1234567', environment: 'sandbox' });
  assert.equal(seen[0].body.teamId, 'ABCDE12345');
  assert.deepEqual(seen[0].body.apps, ['com.example.two']);
  assert.equal(seen[0].body.keys[0].keyId, 'KEY1234567');
  assert.equal(seen[0].body.keys[0].environment, 'sandbox');
  assert.equal('devices' in seen[0].body, false);
  await team.delete();
  assert.equal(team.deleted, true);
});

test('createTemporaryTeam draws generated IDs again on a 409, given ones not', { timeout: 10000 }, async () => {
  const admin = await client();
  answer = route({ 'POST /prefix/v1/teams': [409, { error: 'teamId: taken' }] });
  const error = await admin.createTemporaryTeam({ apps: ['com.example.one'] }).catch(e => e);
  assert.ok(error instanceof AdminError);
  assert.equal(error.status, 409);
  assert.equal(new Set(seen.map(request => request.body.teamId)).size, 3);
  seen.length = 0;
  await admin.createTemporaryTeam({ apps: ['com.example.one'], teamId: 'ABCDE12345', keyId: 'KEY1234567' }).catch(e => e);
  assert.equal(seen.length, 1);
});

test('providerToken: an ES256 JWT of the team and key, r||s signed', () => {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const before = Math.floor(Date.now() / 1000);
  const token = providerToken({ key: privateKey.export({ type: 'pkcs8', format: 'pem' }), keyId: 'KEY0000001', teamId: 'TEAM000001' });
  const [header, claims, signature] = token.split('.');
  const decode = part => JSON.parse(Buffer.from(part, 'base64url').toString('utf8'));
  assert.deepEqual(decode(header), { alg: 'ES256', kid: 'KEY0000001' });
  const { iss, iat } = decode(claims);
  assert.equal(iss, 'TEAM000001');
  assert.ok(Number.isInteger(iat) && iat >= before && iat <= Math.floor(Date.now() / 1000));
  assert.equal(Buffer.from(signature, 'base64url').length, 64);
  assert.ok(crypto.verify('sha256', Buffer.from(`${header}.${claims}`), { key: publicKey, dsaEncoding: 'ieee-p1363' },
    Buffer.from(signature, 'base64url')));
  assert.deepEqual(decode(providerToken({ key: privateKey, keyId: 'K', teamId: 'T', issuedAt: 1700000000.9 }).split('.')[1]),
    { iss: 'T', iat: 1700000000 });
  assert.equal(decode(providerToken({ key: privateKey, keyId: 'K', teamId: 'T', issuedAt: new Date(1700000000000) }).split('.')[1]).iat,
    1700000000);
  const other = crypto.generateKeyPairSync('ec', { namedCurve: 'secp384r1' }).privateKey;
  assert.throws(() => providerToken({ key: other, keyId: 'K', teamId: 'T' }), TypeError);
});

test('randomId: 10 uppercase letters and digits', () => {
  const ids = new Set(Array.from({ length: 200 }, randomId));
  assert.equal(ids.size, 200);
  for (const id of ids) assert.match(id, ID);
});
