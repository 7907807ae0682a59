'use strict';
// Teams against the live mock that scripts/client-tests starts: two teams on one mock, pushes
// signed with each team's own key (Node's http2, as test/push.js sends), each team's admin client
// seeing and changing only its own state.
require('./one-at-a-time'); // the other files' unscoped reset() resets every team too
const { test } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const { AdminClient, AdminError, randomId } = require('..');
const { push, connect, deviceToken } = require('./push');
const { rejection } = require('./rejection');

const admin = new AdminClient({ url: process.env.MOCK_ADMIN_URL, timeoutMs: 10000 });
const bounded = { timeout: 60000 };

/** A bundle ID no other team has. */
const app = () => `com.example.teams.n${crypto.randomBytes(4).toString('hex')}`;


/** Runs `body(teams…)` with a temporary team for each of `options`, deleting them afterwards whatever happens. */
async function withTeams(options, body) {
  const teams = [];
  try {
    for (const option of options) teams.push(await admin.createTemporaryTeam(option));
    return await body(...teams);
  } finally {
    for (const team of teams) await team.delete();
  }
}

test('two teams on one mock see only their own pushes, stats and clock', bounded, async () => {
  await admin.reset();
  await withTeams([{ apps: [app()] }, { apps: [app()] }], async (a, b) => {
    const listed = new Map((await admin.listTeams()).map(team => [team.teamId, team]));
    assert.equal(listed.get(a.teamId).source, 'api');
    assert.deepEqual(listed.get(a.teamId).apps, a.apps);
    assert.deepEqual(listed.get(b.teamId).keys.map(key => key.keyId), [b.keyId]);
    assert.equal(a.team.teamId, a.teamId);

    const token = deviceToken();
    const sent = await push(token, { title: 'for A', team: a });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const [record] = await a.admin.waitFor({ token }, { count: 1, timeout: 5 });
    assert.equal(record.auth.teamId, a.teamId);
    assert.equal(record.auth.keyId, a.keyId);
    assert.equal(record.topic, a.apps[0]);
    assert.equal(record.payload.aps.alert.title, 'for A');
    assert.equal(record.apnsId.toLowerCase(), sent.apnsId.toLowerCase());
    assert.deepEqual((await b.admin.listNotifications({ token, outcome: 'all' })).notifications, []);
    assert.deepEqual((await admin.listNotifications({ token })).notifications.map(r => r.seq), [record.seq], 'unscoped: every team');

    const [aStats, bStats] = [await a.admin.stats(), await b.admin.stats()];
    assert.equal(aStats.team, a.teamId);
    assert.equal(bStats.team, b.teamId);
    assert.ok(aStats.requests >= 1);
    assert.equal(bStats.requests, 0);

    const moved = await a.admin.advanceClock(60);
    assert.equal(moved.teamOffsetSeconds, 60);
    assert.equal(moved.offsetSeconds, 60);
    assert.equal((await b.admin.clock()).offsetSeconds, 0);
    assert.equal((await admin.clock()).offsetSeconds, 0);

    // A scoped reset forgets A's records, in A's view and the unscoped one.
    await a.admin.reset();
    assert.deepEqual((await a.admin.listNotifications({ token, outcome: 'all' })).notifications, []);
    assert.deepEqual((await admin.listNotifications({ token, outcome: 'all' })).notifications, []);
    assert.equal((await a.admin.clock()).offsetSeconds, 0);
  });
});

test('one team\'s faults do not touch another team\'s pushes', bounded, async () => {
  await admin.reset();
  await withTeams([{ apps: [app()] }, { apps: [app()] }], async (a, b) => {
    const rule = await b.admin.addFault({ respond: { reason: 'BadDeviceToken' } }); // every push of B's
    assert.deepEqual((await b.admin.listFaults()).map(r => r.id), [rule.id]);
    assert.deepEqual(await a.admin.listFaults(), []);

    const [aToken, bToken] = [deviceToken(), deviceToken()];
    const aSent = await push(aToken, { team: a });
    assert.equal(aSent.status, 200, JSON.stringify(aSent.body));
    const bSent = await push(bToken, { team: b });
    assert.equal(bSent.status, 400);
    assert.equal(bSent.body.reason, 'BadDeviceToken');
    const mockSent = await push(deviceToken()); // the mock's own team (MOCK_TEAM_ID): B's rule is not global
    assert.equal(mockSent.status, 200, JSON.stringify(mockSent.body));

    const [aRecord] = await a.admin.waitFor({ token: aToken });
    assert.equal(aRecord.injected, false);
    const [bRecord] = await b.admin.waitFor({ token: bToken, outcome: 'rejected' });
    assert.equal(bRecord.injected, true);
    assert.equal(bRecord.reason, 'BadDeviceToken');
  });
});

test('a team\'s device policy applies to its pushes only', bounded, async () => {
  await admin.reset();
  const bundle = app();
  const known = deviceToken();
  const devices = { policy: 'registered', tokens: [{ token: known, topic: bundle, environment: 'sandbox' }] };
  await withTeams([{ apps: [bundle], devices }], async team => {
    assert.deepEqual(team.team.devices, { policy: 'registered', count: 1 });
    assert.equal((await push(known, { team })).status, 200);
    const stranger = deviceToken();
    const refused = await push(stranger, { team });
    assert.equal(refused.status, 400);
    assert.equal(refused.body.reason, 'BadDeviceToken');
    assert.equal((await push(stranger)).status, 200, 'the mock\'s own team: the global (open) policy');
    assert.ok((await team.admin.listDevices()).devices.some(device => device.token === known));
  });
});

test('a deleted team\'s tokens are refused, its records gone, its calls 404', bounded, async () => {
  await admin.reset();
  const team = await admin.createTemporaryTeam({ apps: [app()] });
  const token = deviceToken();
  try {
    assert.equal((await push(token, { team })).status, 200);
    await team.admin.waitFor({ token });
  } finally {
    await team.delete();
  }
  assert.equal((await admin.listTeams()).some(t => t.teamId === team.teamId), false);
  const refused = await push(deviceToken(), { team });
  assert.equal(refused.status, 403);
  assert.equal(refused.body.reason, 'InvalidProviderToken');
  assert.deepEqual((await admin.listNotifications({ token, outcome: 'all' })).notifications, []);
  const error = await rejection(team.admin.listNotifications());
  assert.ok(error instanceof AdminError);
  assert.equal(error.status, 404);
  assert.ok(error.message.startsWith(`team: ${team.teamId} `), error.message);
  assert.equal((await rejection(admin.deleteTeam(team.teamId))).status, 404);
});

test('a team\'s tokens are refused on a connection already open once the team is deleted', bounded, async () => {
  await admin.reset();
  const team = await admin.createTemporaryTeam({ apps: [app()] });
  const session = connect();
  session.on('error', () => {}); // a failure shows as the push's rejection
  try {
    const jwt = team.providerToken();
    assert.equal((await push(deviceToken(), { team, jwt, session })).status, 200);
    await team.delete();
    const refused = await push(deviceToken(), { team, jwt, session });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.reason, 'InvalidProviderToken');
  } finally {
    session.close();
    await team.delete();
  }
});

test('a team\'s event stream and channels are its own', bounded, async () => {
  await admin.reset();
  await withTeams([{ apps: [app()] }, { apps: [app()] }], async (a, b) => {
    const stream = b.admin.events({ outcome: 'all' }, { signal: AbortSignal.timeout(15000) });
    try {
      await stream.opened;
      const [aToken, bToken] = [deviceToken(), deviceToken()];
      assert.equal((await push(aToken, { team: a })).status, 200);
      assert.equal((await push(bToken, { team: b })).status, 200);
      const { value: event } = await stream.next();
      assert.equal(event.type, 'message');
      assert.equal(event.data.token, bToken, 'B\'s stream skips A\'s push');
      assert.equal(event.data.auth.teamId, b.teamId);
    } finally {
      stream.close();
    }

    const channel = await a.admin.createChannel({ bundleId: a.apps[0] });
    const foreign = await rejection(a.admin.createChannel({ bundleId: b.apps[0] }));
    assert.equal(foreign.status, 400);
    assert.match(foreign.message, /^bundleId: /);
    assert.deepEqual((await a.admin.listChannels()).map(c => c.channelId), [channel.channelId]);
    assert.deepEqual(await b.admin.listChannels(), []);
    assert.ok((await admin.listChannels()).some(c => c.channelId === channel.channelId), 'unscoped: every team\'s');
    await a.admin.reset(); // the channels of its apps go with it
    assert.deepEqual(await a.admin.listChannels(), []);
  });
});

test('an unknown team is a 404, a malformed one a 400', bounded, async () => {
  await admin.reset();
  const unknown = admin.forTeam('NOSUCHTEAM');
  const error = await rejection(unknown.listNotifications());
  assert.ok(error instanceof AdminError);
  assert.equal(error.status, 404);
  assert.ok(error.message.startsWith('team: NOSUCHTEAM '), error.message);
  assert.equal((await rejection(unknown.addFault({ respond: { reason: 'BadDeviceToken' } }))).status, 404);
  assert.deepEqual(await admin.listFaults(), []);
  const malformed = await rejection(admin.forTeam('not-a-team').stats());
  assert.equal(malformed.status, 400);
  assert.match(malformed.message, /^team/);
});

test('createTeam: 400 names the field, 409 for what is taken', bounded, async () => {
  await admin.reset();
  const { publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const pem = publicKey.export({ type: 'spki', format: 'pem' });
  const [teamId, keyId, bundle] = [randomId(), randomId(), app()];
  const noApps = await rejection(admin.createTeam({ teamId, apps: [] }));
  assert.equal(noApps.status, 400);
  assert.match(noApps.message, /^apps: /);
  const badKey = await rejection(admin.createTeam({ teamId, apps: [bundle], keys: [{ keyId, pem: 'not a key' }] }));
  assert.equal(badKey.status, 400);
  assert.match(badKey.message, /^keys\[0\]\.pem: /);
  const created = await admin.createTeam({ teamId, apps: [bundle], keys: [{ keyId, pem }] });
  try {
    assert.equal(created.teamId, teamId);
    assert.equal(created.source, 'api');
    assert.equal(created.keys[0].keyId, keyId);
    assert.equal(created.keys[0].environment, 'any');
    assert.equal((await rejection(admin.createTeam({ teamId, apps: [app()] }))).status, 409);
    assert.equal((await rejection(admin.createTeam({ teamId: randomId(), apps: [bundle] }))).status, 409, 'the app is taken');
    const configured = (await admin.listTeams()).filter(t => t.source === 'configuration').map(t => t.teamId);
    assert.ok(configured.includes(process.env.MOCK_TEAM_ID), JSON.stringify(configured));
    assert.equal((await rejection(admin.deleteTeam(process.env.MOCK_TEAM_ID))).status, 409);
  } finally {
    await admin.deleteTeam(teamId);
  }
});
