'use strict';
// node --test runs test files in parallel processes, but this suite's files share one mock and
// each test starts with POST /v1/reset: a file that requires this module waits until no other such
// file runs (a lock directory in the temporary directory, per mock), and holds the mock until it
// exits. (node --test also runs this file as a test file: it defines no tests.)
const crypto = require('node:crypto');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const mock = process.env.MOCK_ADMIN_URL || 'http://127.0.0.1:2198';
const lock = path.join(os.tmpdir(), `apns-mock-node-tests-${crypto.createHash('sha256').update(mock).digest('hex').slice(0, 12)}.lock`);
const pidFile = path.join(lock, 'pid');
const sleep = milliseconds => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, milliseconds);

function holderIsGone() {
  let pid;
  try {
    pid = Number(fs.readFileSync(pidFile, 'utf8'));
  } catch (_) {
    return false; // being taken right now: its pid comes next
  }
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return error.code === 'ESRCH';
  }
}

const deadline = Date.now() + 300000;
for (;;) {
  try {
    fs.mkdirSync(lock);
    fs.writeFileSync(pidFile, String(process.pid));
    break;
  } catch (error) {
    if (error.code !== 'EEXIST') throw error;
    if (holderIsGone()) fs.rmSync(lock, { recursive: true, force: true });
    else if (Date.now() > deadline) throw new Error(`${lock} held for 5 minutes: is a test process stuck?`);
    else sleep(50);
  }
}
process.on('exit', () => fs.rmSync(lock, { recursive: true, force: true }));
