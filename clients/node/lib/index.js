'use strict';
// @hub/client: the Node.js client of hub. See README.md.
const { HubClient } = require('./client');
const { PresenceSession } = require('./session');
const { HubError } = require('./errors');
const convert = require('./convert');
const { loadProtos } = require('./protos');
const { status } = require('@grpc/grpc-js');

module.exports = { HubClient, PresenceSession, HubError, status, loadProtos, ...convert };
