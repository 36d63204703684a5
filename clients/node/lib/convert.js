'use strict';
// Conversions between JavaScript values and the well-known protobuf types as
// @grpc/proto-loader represents them (see protos.js for its options).

/** google.protobuf.Duration from milliseconds. */
function duration(ms) {
  const whole = Math.trunc(ms);
  return { seconds: Math.trunc(whole / 1000), nanos: (whole % 1000) * 1e6 };
}

/** Milliseconds of a google.protobuf.Duration (0 when absent). */
function durationMs(d) {
  if (!d) return 0;
  return Number(d.seconds || 0) * 1000 + Math.trunc(Number(d.nanos || 0) / 1e6);
}

/** A Date from a google.protobuf.Timestamp (null when absent). */
function toDate(ts) {
  if (!ts) return null;
  return new Date(Number(ts.seconds || 0) * 1000 + Math.trunc(Number(ts.nanos || 0) / 1e6));
}

function toValue(v) {
  if (v === null || v === undefined) return { nullValue: 'NULL_VALUE' };
  if (typeof v === 'number') return { numberValue: v };
  if (typeof v === 'string') return { stringValue: v };
  if (typeof v === 'boolean') return { boolValue: v };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  if (typeof v === 'object') return { structValue: toStruct(v) };
  throw new TypeError(`cannot put a ${typeof v} into a google.protobuf.Value`);
}

/** google.protobuf.Struct from a plain JSON-like object. */
function toStruct(obj) {
  const fields = {};
  for (const [k, v] of Object.entries(obj || {})) fields[k] = toValue(v);
  return { fields };
}

function fromValue(v) {
  if (!v) return null;
  switch (v.kind) {
    case 'numberValue': return v.numberValue;
    case 'stringValue': return v.stringValue;
    case 'boolValue': return v.boolValue;
    case 'structValue': return fromStruct(v.structValue);
    case 'listValue': return ((v.listValue && v.listValue.values) || []).map(fromValue);
    default: return null;
  }
}

/** A plain object from a google.protobuf.Struct (null when absent). */
function fromStruct(s) {
  if (!s) return null;
  const out = {};
  for (const [k, v] of Object.entries(s.fields || {})) out[k] = fromValue(v);
  return out;
}

module.exports = { duration, durationMs, toDate, toStruct, fromStruct };
