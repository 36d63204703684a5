'use strict';
// HubClient: one channel to a hub, its services as promise-returning
// methods, and every failure as a HubError (gRPC code + hub reason code).
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const { loadProtos } = require('./protos');
const { fromGrpcError } = require('./errors');

const DEFAULT_DEADLINE_MS = 10000;

// Channel defaults: find a dead hub within ~15 s even when idle, and retry a
// lost connection quickly. While the hub is down the channel tries to
// connect every max_reconnect_backoff_ms (+-20 %), and a PresenceSession
// waits for the channel rather than sleeping a backoff of its own, so this
// bounds how long an agent stays away from a hub that came back
// (docs/RELIABILITY.md). The hub accepts pings every second or slower.
const DEFAULT_CHANNEL_OPTIONS = {
  'grpc.keepalive_time_ms': 10000,
  'grpc.keepalive_timeout_ms': 5000,
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 500,
};

const SERVICES = {
  hub: 'HubService',
  presence: 'PresenceService',
  roles: 'RoleService',
  messages: 'MessageService',
  reservations: 'ReservationService',
  jobs: 'JobService',
};

// PEM text from a Buffer, PEM text, or a file path.
function pem(value) {
  if (value === undefined || value === null) return null;
  if (Buffer.isBuffer(value)) return value;
  if (value.includes('-----BEGIN ')) return Buffer.from(value);
  return fs.readFileSync(value);
}

function tlsCredentials(options, channelOptions) {
  if (!options.tls && !options.tlsCa && !options.tlsCert) {
    return grpc.credentials.createInsecure();
  }
  if (!options.tlsCert !== !options.tlsKey) {
    throw new Error('tlsCert and tlsKey go together');
  }
  if (options.tlsServerName) {
    channelOptions['grpc.ssl_target_name_override'] = options.tlsServerName;
    channelOptions['grpc.default_authority'] = options.tlsServerName;
  }
  return grpc.credentials.createSsl(pem(options.tlsCa), pem(options.tlsKey),
    pem(options.tlsCert));
}

// Adds `authorization: Bearer <token>` to every call. An interceptor, not
// call credentials: gRPC sends call credentials only over TLS, and a loopback
// hub may take tokens over plaintext.
function bearerToken(token) {
  const header = `Bearer ${token}`;
  return (options, nextCall) => new grpc.InterceptingCall(nextCall(options), {
    start(metadata, listener, next) {
      metadata.set('authorization', header);
      next(metadata, listener);
    },
  });
}

class HubClient {
  /**
   * @param {string} address host:port of a hubd, e.g. "127.0.0.1:27889".
   * @param {object} [options]
   * @param {number} [options.deadlineMs=10000] default deadline of unary calls.
   * @param {grpc.ChannelCredentials} [options.credentials] default: insecure,
   *   or TLS when a tls* option is given.
   * @param {boolean} [options.tls] TLS with the system's roots (implied by
   *   tlsCa / tlsCert).
   * @param {string|Buffer} [options.tlsCa] PEM (or a PEM file's path) of the
   *   CA that signed the hub's certificate.
   * @param {string|Buffer} [options.tlsCert] client certificate for mutual
   *   TLS, with [options.tlsKey] its private key (PEM or path).
   * @param {string} [options.tlsServerName] the name in the hub's certificate
   *   when it differs from the address's host.
   * @param {string} [options.token] bearer token sent as
   *   `authorization: Bearer <token>` on every call and stream; default
   *   $HUB_TOKEN when set.
   * @param {object} [options.channelOptions] grpc-js channel options, merged
   *   over the defaults above.
   * @param {string} [options.protoDir] directory holding hub/v1/*.proto.
   * @param {string[]} [options.includeDirs] directories holding google/...
   */
  constructor(address, options = {}) {
    const { packageDefinition, rpcRoot } = loadProtos(options);
    this.address = address;
    this.deadlineMs = options.deadlineMs || DEFAULT_DEADLINE_MS;
    this._rpcRoot = rpcRoot;
    const channelOptions = { ...DEFAULT_CHANNEL_OPTIONS, ...(options.channelOptions || {}) };
    const credentials = options.credentials || tlsCredentials(options, channelOptions);
    this._channel = new grpc.Channel(address, credentials, channelOptions);
    const token = options.token === undefined ? process.env.HUB_TOKEN : options.token;
    const interceptors = token ? [bearerToken(token.trim())] : [];
    const v1 = grpc.loadPackageDefinition(packageDefinition).hub.v1;
    this._stubs = {};
    for (const [ns, service] of Object.entries(SERVICES)) {
      const Stub = v1[service];
      const stub = new Stub(address, credentials,
        { channelOverride: this._channel, interceptors });
      this._stubs[ns] = stub;
      // One promise-returning method per unary RPC, named in lowerCamelCase:
      // client.presence.registerAgent(request, {deadlineMs, metadata}).
      const methods = {};
      for (const [name, def] of Object.entries(Stub.service)) {
        if (def.requestStream || def.responseStream) continue;
        const lower = def.originalName || name[0].toLowerCase() + name.slice(1);
        methods[lower] = (request, callOptions) =>
          this._unary(stub, name, request || {}, callOptions);
      }
      this[ns] = Object.freeze(methods);
    }
  }

  _unary(stub, method, request, callOptions = {}) {
    const deadlineMs = callOptions.deadlineMs || this.deadlineMs;
    const metadata = callOptions.metadata || new grpc.Metadata();
    return new Promise((resolve, reject) => {
      stub[method](request, metadata, { deadline: Date.now() + deadlineMs }, (err, response) => {
        if (err) reject(fromGrpcError(err, this._rpcRoot));
        else resolve(response);
      });
    });
  }

  /**
   * Opens a raw PresenceService.Attach stream (a grpc-js duplex stream of
   * AttachRequest / AttachResponse objects). Most callers want
   * PresenceSession instead.
   */
  attach(metadata) {
    return this._stubs.presence.Attach(metadata || new grpc.Metadata());
  }

  /** Opens a raw RoleService.WatchRoles stream. */
  watchRoles(request, metadata) {
    return this._stubs.roles.WatchRoles(request || {}, metadata || new grpc.Metadata());
  }

  /**
   * The channel's connectivity: 'ready', 'shutdown' (closed) or 'down'
   * (idle, connecting or in reconnect backoff). `tryToConnect` starts a
   * connection attempt when the channel is idle.
   */
  connectivity(tryToConnect = false) {
    const state = this._channel.getConnectivityState(tryToConnect);
    if (state === grpc.connectivityState.READY) return 'ready';
    if (state === grpc.connectivityState.SHUTDOWN) return 'shutdown';
    return 'down';
  }

  /**
   * Resolves with connectivity() once the channel is ready or shut down, or
   * after timeoutMs with 'down'. Starts a connection attempt if none is
   * under way.
   */
  waitForConnected(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    return new Promise((resolve) => {
      const check = () => {
        const now = this.connectivity(true);
        if (now !== 'down' || Date.now() >= deadline) return resolve(now);
        this._channel.watchConnectivityState(
          this._channel.getConnectivityState(false), deadline, check);
      };
      check();
    });
  }

  /** A HubError from an error or status a raw stream reported. */
  toHubError(err) {
    return fromGrpcError(err, this._rpcRoot);
  }

  /** Closes the channel; calls in flight fail with CANCELLED/UNAVAILABLE. */
  close() {
    for (const stub of Object.values(this._stubs)) stub.close();
    this._channel.close();
  }
}

module.exports = { HubClient, DEFAULT_CHANNEL_OPTIONS, DEFAULT_DEADLINE_MS };
