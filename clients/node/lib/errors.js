'use strict';
// hub's error model on the client: every failure carries the gRPC status code
// and, when the hub sent one, the stable reason code from the
// google.rpc.ErrorInfo (domain "hub.v1") inside the google.rpc.Status of the
// `grpc-status-details-bin` trailer (errors.proto, hub/services/error_mapping.h).
const grpc = require('@grpc/grpc-js');

const CODE_NAMES = Object.fromEntries(
  Object.entries(grpc.status).filter(([, v]) => typeof v === 'number').map(([k, v]) => [v, k]));

const ERROR_INFO_TYPE = 'google.rpc.ErrorInfo';
const REASON_PREFIX = 'ERROR_REASON_';

/** A failed hub call or stream: gRPC code plus hub's reason code. */
class HubError extends Error {
  constructor({ code, message, reason = '', domain = '', metadata = {}, trailers = null }) {
    const codeName = CODE_NAMES[code] || String(code);
    const text = message || '';
    super(`${codeName}: ${text}` + (reason && !text.includes(reason) ? ` [${reason}]` : ''));
    this.name = 'HubError';
    /** gRPC status code (number, grpc.status). */
    this.code = code;
    /** gRPC status code name, e.g. "FAILED_PRECONDITION". */
    this.codeName = codeName;
    /** Stable reason, e.g. "STALE_PRESENCE_OWNER"; "" when the hub sent none. */
    this.reason = reason;
    /** ErrorInfo.domain ("hub.v1" for hub's own errors). */
    this.domain = domain;
    /** ErrorInfo.metadata (string -> string). */
    this.metadata = metadata;
    /** The server's human-readable text (not stable). */
    this.details = message || '';
    /** The call's trailing grpc.Metadata, when there was one. */
    this.trailers = trailers;
  }
}

// The ErrorInfo inside a serialized google.rpc.Status, or null.
function decodeErrorInfo(statusBytes, rpcRoot) {
  const Status = rpcRoot.lookupType('google.rpc.Status');
  const ErrorInfo = rpcRoot.lookupType(ERROR_INFO_TYPE);
  const status = Status.decode(statusBytes);
  for (const any of status.details || []) {
    const typeUrl = any.type_url || '';
    if (typeUrl === ERROR_INFO_TYPE || typeUrl.endsWith('/' + ERROR_INFO_TYPE)) {
      const info = ErrorInfo.toObject(ErrorInfo.decode(any.value), { defaults: true });
      return { reason: info.reason, domain: info.domain, metadata: { ...info.metadata } };
    }
  }
  return null;
}

// A HubError from a grpc-js error (a failed unary call or stream status).
function fromGrpcError(err, rpcRoot) {
  if (err instanceof HubError) return err;
  const trailers = err && err.metadata instanceof grpc.Metadata ? err.metadata : null;
  let info = null;
  if (trailers) {
    const values = trailers.get('grpc-status-details-bin');
    if (values.length > 0) {
      try {
        info = decodeErrorInfo(Buffer.from(values[0]), rpcRoot);
      } catch (_) {
        info = null;  // a malformed detail never hides the status itself
      }
    }
  }
  const code = err && typeof err.code === 'number' ? err.code : grpc.status.UNKNOWN;
  return new HubError({
    code,
    message: err ? (err.details !== undefined ? err.details : err.message) : '',
    reason: info ? info.reason : '',
    domain: info ? info.domain : '',
    metadata: info ? info.metadata : {},
    trailers,
  });
}

// The reason's wire string ("STALE_EPOCH") from an ErrorReason enum name.
function reasonName(enumName) {
  if (!enumName || enumName === 'ERROR_REASON_UNSPECIFIED') return '';
  return String(enumName).startsWith(REASON_PREFIX) ?
    String(enumName).slice(REASON_PREFIX.length) : String(enumName);
}

// A HubError from an in-band hub.v1.ErrorStatus (a presence stream's
// frame_error).
function fromErrorStatus(errorStatus) {
  return new HubError({
    code: errorStatus.code,
    message: errorStatus.message,
    reason: reasonName(errorStatus.reason),
    domain: 'hub.v1',
    metadata: { ...(errorStatus.metadata || {}) },
  });
}

module.exports = { HubError, fromGrpcError, fromErrorStatus, reasonName, CODE_NAMES };
