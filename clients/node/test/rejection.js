'use strict';
// A helper the live tests share.
const assert = require('node:assert/strict');

/** The promise's rejection, failing when it resolves. */
async function rejection(promise) {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  assert.fail('expected a rejection');
}

module.exports = { rejection };
