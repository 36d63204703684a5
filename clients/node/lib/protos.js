'use strict';
// Finds and loads the .proto files the client needs, at run time (no build
// step, nothing generated):
//   - hub's own contract, proto/hub/v1/*.proto. Looked up in
//     options.protoDir, then $HUB_PROTO_DIR, then the checkout this package
//     lives in (clients/node/../../proto).
//   - the protos those import and the error model uses:
//     google/protobuf/*.proto (Debian: libprotobuf-dev, /usr/include) and
//     google/rpc/{status,error_details}.proto (Debian:
//     golang-github-gogo-googleapis-dev). Looked up in options.includeDirs,
//     then $HUB_PROTO_INCLUDE (':'-separated), then Debian's locations.
const fs = require('fs');
const path = require('path');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const HUB_FILES = [
  'hub/v1/hub.proto',
  'hub/v1/presence.proto',
  'hub/v1/role_service.proto',
  'hub/v1/message.proto',
  'hub/v1/reservation.proto',
  'hub/v1/job.proto',
];
const DEBIAN_INCLUDE_DIRS = [
  '/usr/include',
  '/usr/share/gocode/src/github.com/gogo/googleapis',
];

// Options of @grpc/proto-loader: camelCase fields (agentId), enums as their
// names, int64 as JavaScript numbers (generations, epochs and sequences stay
// far below 2^53), oneofs named by a virtual field (`frame`, `event`), and
// absent proto3 `optional` fields left undefined.
const LOADER_OPTIONS = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
};

function splitDirs(value) {
  return (value || '').split(':').filter((d) => d.length > 0);
}

// The directory that holds hub/v1/*.proto.
function findProtoDir(options = {}) {
  const candidates = [
    options.protoDir,
    process.env.HUB_PROTO_DIR,
    path.resolve(__dirname, '..', '..', '..', 'proto'),
  ].filter(Boolean);
  for (const dir of candidates) {
    if (fs.existsSync(path.join(dir, 'hub', 'v1', 'presence.proto'))) return dir;
  }
  throw new Error(
    'hub client: cannot find hub/v1/presence.proto; pass protoDir or set ' +
      'HUB_PROTO_DIR to the directory holding hub/v1/*.proto (looked in: ' +
      candidates.join(', ') + ')');
}

// Include directories for the google/... imports; each required file must be
// found in one of them.
function findIncludeDirs(options = {}) {
  const dirs = [
    ...(options.includeDirs || []),
    ...splitDirs(process.env.HUB_PROTO_INCLUDE),
    ...DEBIAN_INCLUDE_DIRS,
  ];
  for (const needed of ['google/protobuf/timestamp.proto', 'google/rpc/status.proto',
    'google/rpc/error_details.proto']) {
    if (!dirs.some((d) => fs.existsSync(path.join(d, needed)))) {
      throw new Error(
        `hub client: cannot find ${needed}; install Debian's libprotobuf-dev and ` +
          'golang-github-gogo-googleapis-dev (tools/setup.sh does), or pass ' +
          'includeDirs / set HUB_PROTO_INCLUDE (looked in: ' + dirs.join(', ') + ')');
    }
  }
  return dirs;
}

// Loads everything once per (protoDir, includeDirs). Returns
//   { packageDefinition, rpcRoot }
// packageDefinition feeds grpc.loadPackageDefinition; rpcRoot is a protobufjs
// root holding google.rpc.Status and google.rpc.ErrorInfo for decoding the
// grpc-status-details-bin trailer.
const cache = new Map();
function loadProtos(options = {}) {
  const protoDir = findProtoDir(options);
  const includeDirs = findIncludeDirs(options);
  const key = [protoDir, ...includeDirs].join('\0');
  if (cache.has(key)) return cache.get(key);
  const packageDefinition = protoLoader.loadSync(HUB_FILES, {
    ...LOADER_OPTIONS,
    includeDirs: [protoDir, ...includeDirs],
  });
  const rpcRoot = new protobuf.Root();
  rpcRoot.resolvePath = (origin, target) => {
    for (const dir of includeDirs) {
      const full = path.join(dir, target);
      if (fs.existsSync(full)) return full;
    }
    return target;
  };
  rpcRoot.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto'],
    { keepCase: true });
  rpcRoot.resolveAll();
  const loaded = { packageDefinition, rpcRoot, protoDir, includeDirs };
  cache.set(key, loaded);
  return loaded;
}

module.exports = { loadProtos, findProtoDir, findIncludeDirs, LOADER_OPTIONS };
