'use strict';
// Every operation of AdminClient against the live mock that scripts/client-tests starts.
require('./one-at-a-time');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { rejection } = require('./rejection');
const fs = require('node:fs');
const { AdminClient, AdminError, WaitTimeoutError } = require('..');
const { push, deviceToken } = require('./push');

const admin = new AdminClient({ url: process.env.MOCK_ADMIN_URL, timeoutMs: 10000 });
const topic = process.env.MOCK_TOPIC;
const bounded = { timeout: 30000 }; // every test starts with admin.reset()
/** Ends a stream that a failing test would otherwise leave open (and the process with it). */
const soon = () => AbortSignal.timeout(10000);


test('health answers ok with the ports', bounded, async () => {
  await admin.reset();
  const health = await admin.health();
  assert.equal(health.status, 'ok');
  assert.equal(health.ports.apns, Number(process.env.MOCK_APNS_PORT));
  assert.equal(health.ports.admin, Number(process.env.MOCK_ADMIN_PORT));
});

test('a push is listed, waited for and deleted', bounded, async () => {
  await admin.reset();
  const token = deviceToken();
  const sent = await push(token, { title: 'Listed' });
  assert.equal(sent.status, 200);
  assert.match(sent.apnsId, /^[0-9A-F-]{36}$/i);

  const [record] = await admin.waitFor({ token }, { count: 1, timeout: 5 });
  assert.equal(record.token, token);
  assert.equal(record.status, 200);
  assert.equal(record.apnsId.toLowerCase(), sent.apnsId.toLowerCase());
  assert.equal(record.payload.aps.alert.title, 'Listed');
  assert.equal(record.headers['apns-topic'], topic);
  assert.equal(record.auth.method, 'token');

  const page = await admin.listNotifications({ token, topic, pushType: 'alert', apnsId: sent.apnsId, limit: 10 });
  assert.deepEqual(page.notifications.map(r => r.seq), [record.seq]);
  assert.equal(page.next, record.seq);
  assert.equal(page.more, false);
  assert.equal((await admin.listNotifications({ token, since: record.seq })).notifications.length, 0);
  assert.equal((await admin.listNotifications({ token: deviceToken(), outcome: 'all' })).notifications.length, 0);
  assert.equal((await admin.listNotifications({ collapseId: 'none', kind: 'device' })).notifications.length, 0);
  assert.equal((await admin.listNotifications({ channelId: 'bm8=', reason: 'BadTopic' })).notifications.length, 0);

  await admin.deleteNotifications();
  assert.deepEqual((await admin.listNotifications({ token })).notifications, []);
});

test('waitFor that times out rejects with what matched', bounded, async () => {
  await admin.reset();
  const token = deviceToken();
  assert.equal((await push(token)).status, 200);
  const started = Date.now();
  const error = await rejection(admin.waitFor({ token }, { count: 2, timeout: 1 }));
  assert.ok(Date.now() - started >= 900, 'waited about the timeout');
  assert.ok(error instanceof WaitTimeoutError);
  assert.equal(error.matched, 1);
  assert.equal(error.expected, 2);
  assert.equal(error.records.length, 1);
  assert.equal(error.records[0].token, token);
  assert.match(error.message, /1 of 2 matching/);
  assert.match(error.message, new RegExp(`#${error.records[0].seq} 200 - token=${token.slice(0, 8)}… topic=${topic}`));

  const none = await rejection(admin.waitFor({ token: deviceToken() }, { timeout: 0.2 }));
  assert.ok(none instanceof WaitTimeoutError);
  assert.equal(none.matched, 0);
  assert.deepEqual(none.records, []);
  assert.match(none.message, /0 of 1 matching notifications arrived; last seen: none/);
});

test('the server\'s errors surface with status and message intact', bounded, async () => {
  await admin.reset();
  const error = await rejection(admin.advanceClock(-1));
  assert.ok(error instanceof AdminError);
  assert.equal(error.status, 400);
  assert.ok(error.message.startsWith('advanceSeconds:'), error.message);
  assert.equal(error.message, JSON.parse(error.body).error);

  const unknown = await rejection(admin.listNotifications({ colour: 'red' }));
  assert.equal(unknown.status, 400);
  assert.equal(unknown.message, 'colour: unknown query parameter');

  const wait = await rejection(admin.waitFor({}, { count: 0 }));
  assert.ok(wait instanceof AdminError);
  assert.equal(wait.status, 400);
  assert.match(wait.message, /^count: /);
});

test('a fault rule answers BadDeviceToken once', bounded, async () => {
  await admin.reset();
  const token = deviceToken();
  const rule = await admin.addFault({ match: { token }, respond: { reason: 'BadDeviceToken' }, times: 1 });
  assert.equal(typeof rule.id, 'string');
  assert.deepEqual((await admin.listFaults()).map(f => f.id), [rule.id]);

  const rejected = await push(token);
  assert.equal(rejected.status, 400);
  assert.deepEqual(rejected.body, { reason: 'BadDeviceToken' });
  const [record] = await admin.waitFor({ token, outcome: 'rejected' });
  assert.equal(record.status, 400);
  assert.equal(record.reason, 'BadDeviceToken');
  assert.equal(record.injected, true);
  assert.equal((await admin.listNotifications({ token, reason: 'BadDeviceToken' })).notifications.length, 1);
  assert.deepEqual(await admin.listFaults(), [], 'times: 1 is used up');
  assert.equal((await push(token)).status, 200);

  const rules = await admin.addFault([
    { match: { token }, respond: { reason: 'ServiceUnavailable' } },
    { match: { token }, delayMs: 10 },
  ]);
  assert.equal(rules.length, 2);
  await admin.removeFault(rules[0].id);
  assert.deepEqual((await admin.listFaults()).map(f => f.id), [rules[1].id]);
  const missing = await rejection(admin.removeFault(rules[0].id));
  assert.equal(missing.status, 404);
  await admin.clearFaults();
  assert.deepEqual(await admin.listFaults(), []);
});

test('devices: register, unregister (410), remove', bounded, async () => {
  await admin.reset();
  const token = deviceToken();
  const device = await admin.registerDevice({ token, topic, environment: 'sandbox' });
  assert.equal(device.token, token);
  const listed = await admin.listDevices();
  assert.equal(listed.policy, 'open');
  assert.deepEqual(listed.devices.map(d => d.token), [token]);

  const unregistered = await admin.unregisterDevice(token);
  assert.equal(unregistered.reason, 'Unregistered');
  const gone = await push(token);
  assert.equal(gone.status, 410);
  assert.equal(gone.body.reason, 'Unregistered');
  assert.equal(typeof gone.body.timestamp, 'number');

  const other = deviceToken();
  const at = new Date('2030-01-02T03:04:05Z');
  const expired = await admin.unregisterDevice(other, { reason: 'ExpiredToken', timestamp: at });
  assert.equal(expired.reason, 'ExpiredToken');
  const answer = await push(other);
  assert.equal(answer.status, 410);
  assert.deepEqual(answer.body, { reason: 'ExpiredToken', timestamp: at.getTime() });

  await admin.removeDevice(token);
  assert.deepEqual((await admin.listDevices()).devices.map(d => d.token), [other]);
  assert.equal((await push(token)).status, 200);
  assert.equal((await rejection(admin.removeDevice(token))).status, 404);
  assert.equal((await rejection(admin.unregisterDevice('nothex'))).status, 400);
});

test('channels: create, list, delete (IDs with / and + percent-encoded)', bounded, async () => {
  await admin.reset();
  const bundleId = topic;
  const generated = await admin.createChannel({ bundleId });
  assert.equal(generated.bundleId, bundleId);
  assert.equal(generated.environment, 'sandbox');
  const chosen = await admin.createChannel({ bundleId, channelId: 'ab/c+d==', messageStoragePolicy: 0 });
  assert.equal(chosen.channelId, 'ab/c+d==');
  assert.equal(chosen.messageStoragePolicy, 0);

  const ids = (await admin.listChannels({ bundleId, environment: 'sandbox' })).map(c => c.channelId).sort();
  assert.deepEqual(ids, [generated.channelId, 'ab/c+d=='].sort());
  assert.deepEqual(await admin.listChannels({ environment: 'production' }), []);

  await admin.deleteChannel('ab/c+d==');
  assert.deepEqual((await admin.listChannels()).map(c => c.channelId), [generated.channelId]);
  assert.equal((await rejection(admin.deleteChannel('ab/c+d=='))).status, 404);
  assert.equal((await rejection(admin.createChannel({ bundleId: 'com.example.unknown' }))).status, 400);
});

test('events: a push arrives on the open stream, which break closes', bounded, async () => {
  await admin.reset();
  const token = deviceToken();
  const stream = admin.events({ token, outcome: 'all' }, { maxRate: 1000, signal: soon() });
  await stream.opened; // subscribed: what is stored from now on is sent
  const sent = await push(token, { title: 'Streamed' });
  let received = null;
  for await (const event of stream) {
    received = event;
    break;
  }
  assert.equal(received.type, 'message');
  assert.equal(received.data.token, token);
  assert.equal(received.data.payload.aps.alert.title, 'Streamed');
  assert.equal(received.data.apnsId.toLowerCase(), sent.apnsId.toLowerCase());
  assert.equal(received.id, String(received.data.seq));
  assert.deepEqual(await stream.next(), { value: undefined, done: true }, 'closed by break');

  // Replayed from a cursor, ending after `limit` records; Last-Event-ID wins over since.
  await push(token, { title: 'Second' });
  const replayed = [];
  for await (const event of admin.events({ token }, { since: 0, limit: 2, signal: soon() })) replayed.push(event.data.payload.aps.alert.title);
  assert.deepEqual(replayed, ['Streamed', 'Second']);
  const resumed = [];
  for await (const event of admin.events({ token }, { since: 0, lastEventId: received.id, limit: 1, signal: soon() })) resumed.push(event);
  assert.equal(resumed[0].data.payload.aps.alert.title, 'Second');
});

test('events: bad parameters reject, an abort signal ends the stream', bounded, async () => {
  await admin.reset();
  const bad = admin.events({}, { maxRate: 0 });
  const error = await rejection(bad.opened);
  assert.ok(error instanceof AdminError);
  assert.equal(error.status, 400);
  assert.match(error.message, /^maxRate: /);
  assert.equal(await rejection(bad.next()), error);

  const controller = new AbortController();
  setTimeout(() => controller.abort(), 10000).unref();
  const stream = admin.events({}, { signal: controller.signal });
  await stream.opened;
  const pending = stream.next();
  controller.abort();
  assert.equal((await rejection(pending)).name, 'AbortError');
});

test('clock: read and advance', bounded, async () => {
  await admin.reset();
  const before = await admin.clock();
  assert.equal(before.offsetSeconds, 0);
  const after = await admin.advanceClock(3601);
  assert.equal(after.offsetSeconds, 3601);
  assert.ok(Date.parse(after.now) - Date.parse(after.wallClock) >= 3600000);
  assert.equal((await admin.clock()).offsetSeconds, 3601);
  await admin.reset();
  assert.equal((await admin.clock()).offsetSeconds, 0);
});

test('stats, reasons, CA certificate and metrics', bounded, async () => {
  await admin.reset();
  assert.equal((await push(deviceToken())).status, 200);
  const stats = await admin.stats();
  assert.ok(stats.requests >= 1);
  assert.ok(stats.accepted >= 1);
  assert.equal(typeof stats.recording.lastSeq, 'number');

  const reasons = await admin.reasons();
  assert.deepEqual(
    reasons.find(r => r.reason === 'BadDeviceToken'),
    { reason: 'BadDeviceToken', status: 400, explanation: reasons.find(r => r.reason === 'BadDeviceToken').explanation });
  assert.equal(reasons.find(r => r.reason === 'Unregistered').status, 410);

  const pem = await admin.caPem();
  assert.match(pem, /^-----BEGIN CERTIFICATE-----/);
  assert.ok(pem.includes(fs.readFileSync(process.env.MOCK_CA_FILE, 'utf8').trim().split('\n')[1]));

  const metrics = await admin.metrics();
  assert.match(metrics, /apns_requests_total/);
});

test('reset forgets records, faults, devices and channels', bounded, async () => {
  await admin.reset();
  const token = deviceToken();
  await push(token);
  await admin.addFault({ match: { token }, action: 'hang' });
  await admin.unregisterDevice(token);
  await admin.createChannel({ bundleId: topic });
  await admin.reset();
  assert.deepEqual((await admin.listNotifications({ outcome: 'all' })).notifications, []);
  assert.deepEqual(await admin.listFaults(), []);
  assert.deepEqual((await admin.listDevices()).devices, []);
  assert.deepEqual(await admin.listChannels(), []);
  assert.equal((await push(token)).status, 200);
});
