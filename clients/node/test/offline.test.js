'use strict';
// What the live mock cannot show (it runs without an admin token): the client against a small
// local HTTP server that records what it was sent and answers what each test scripts.
const { test, after } = require('node:test');
const assert = require('node:assert/strict');
const http = require('node:http');
const { once } = require('node:events');
const { AdminClient, AdminError } = require('..');

let answer = (request, response) => response.end();
const seen = [];
const server = http.createServer((request, response) => {
  seen.push({ method: request.method, url: request.url, headers: request.headers });
  answer(request, response);
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
