// Types of @hub/client. Messages are plain objects as @grpc/proto-loader
// decodes them (camelCase fields, enums as names, int64 as number, oneofs
// named by a virtual field); they are typed loosely here.
import { EventEmitter } from 'events';
import type { ChannelCredentials, ChannelOptions, Metadata, ClientDuplexStream, ClientReadableStream } from '@grpc/grpc-js';

export { status } from '@grpc/grpc-js';

/** A hub.v1 message as a plain object. */
export type Msg = { [field: string]: any };

export interface CallOptions {
  /** Deadline of this call in ms (default: the client's deadlineMs). */
  deadlineMs?: number;
  metadata?: Metadata;
}

/** The unary RPCs of one service, lowerCamelCase, promise-returning. */
export type ServiceMethods = { [method: string]: (request?: Msg, options?: CallOptions) => Promise<Msg> };

export interface HubClientOptions {
  /** Default deadline of unary calls, ms (10000). */
  deadlineMs?: number;
  /** Channel credentials; default insecure, or TLS when a tls* option is given. */
  credentials?: ChannelCredentials;
  /** TLS with the system's roots (implied by tlsCa / tlsCert). */
  tls?: boolean;
  /** PEM text, Buffer or PEM file path of the CA that signed the hub's certificate. */
  tlsCa?: string | Buffer;
  /** Client certificate and key for mutual TLS (PEM text, Buffer or path). */
  tlsCert?: string | Buffer;
  tlsKey?: string | Buffer;
  /** The name in the hub's certificate when it differs from the address's host. */
  tlsServerName?: string;
  /** Bearer token sent on every call and stream (default $HUB_TOKEN). */
  token?: string;
  channelOptions?: ChannelOptions;
  /** Directory holding hub/v1/*.proto (else $HUB_PROTO_DIR, else the checkout's proto/). */
  protoDir?: string;
  /** Directories holding google/protobuf and google/rpc protos (else $HUB_PROTO_INCLUDE, then Debian's). */
  includeDirs?: string[];
}

export class HubClient {
  constructor(address: string, options?: HubClientOptions);
  readonly address: string;
  readonly deadlineMs: number;
  /** HubService: getStatus, encodeRoleKey, decodeRoleKey. */
  readonly hub: ServiceMethods;
  /** PresenceService: registerAgent, heartbeat, deregister, getAgent, listAgents. */
  readonly presence: ServiceMethods;
  /** RoleService: reserveRole, compareAndSetRole, getRole, listRoles, ensureRole, ackRoleActivation, ... */
  readonly roles: ServiceMethods;
  /** MessageService: publish, ack, listPending, listDeadLetters, redriveDeadLetter, ask, listTrace. */
  readonly messages: ServiceMethods;
  /** ReservationService: reserve, checkReservations, listReservations, renewReservation, releaseReservation, forceReleaseReservation. */
  readonly reservations: ServiceMethods;
  /**
   * JobService: createJob, claimJob, heartbeatJob, completeJob, failJob, getJob, listJobs,
   * cancelJob, retryJob. A claim answers the job with its `attempt` (a JobAttempt), which
   * heartbeatJob, completeJob and failJob pass back as `attempt`.
   */
  readonly jobs: ServiceMethods;
  attach(metadata?: Metadata): ClientDuplexStream<Msg, Msg>;
  watchRoles(request?: Msg, metadata?: Metadata): ClientReadableStream<Msg>;
  toHubError(err: unknown): HubError;
  /** 'ready', 'shutdown' (closed) or 'down'; tryToConnect starts an attempt when idle. */
  connectivity(tryToConnect?: boolean): 'ready' | 'shutdown' | 'down';
  /** Resolves once the channel is ready or shut down, or with 'down' after timeoutMs. */
  waitForConnected(timeoutMs: number): Promise<'ready' | 'shutdown' | 'down'>;
  close(): void;
}

export class HubError extends Error {
  /** gRPC status code. */
  readonly code: number;
  /** e.g. "FAILED_PRECONDITION". */
  readonly codeName: string;
  /** hub's stable reason, e.g. "STALE_PRESENCE_OWNER"; "" when none. */
  readonly reason: string;
  readonly domain: string;
  readonly metadata: { [key: string]: string };
  /** The server's text (not stable). */
  readonly details: string;
  readonly trailers: Metadata | null;
}

export interface PresenceSessionOptions {
  agentId: string;
  /** 'AGENT_CLI_CLAUDE' | 'AGENT_CLI_CODEX' | 'AGENT_CLI_GEMINI' | 'AGENT_CLI_OTHER' */
  cli: string;
  capabilities?: string[];
  topics?: string[];
  metadata?: { [key: string]: unknown };
  projectId?: string;
  sessionId?: string;
  hostId?: string;
  pid?: number;
  transportLocators?: Msg[];
  transportLocatorsJson?: string;
  /** Lease TTL asked for, ms (30000; the hub accepts 10 s .. 2 h). */
  heartbeatTtlMs?: number;
  /** Heartbeat every this fraction of the granted TTL (1/3). */
  heartbeatFraction?: number;
  /** Fixed heartbeat interval, ms (overrides heartbeatFraction). */
  heartbeatIntervalMs?: number;
  /** How long an answer to a frame may take before the stream is dropped, ms (10000). */
  frameTimeoutMs?: number;
  backoffInitialMs?: number;
  backoffMaxMs?: number;
  backoffMultiplier?: number;
  /** Relative jitter, 0.2 = +-20 %. */
  backoffJitter?: number;
  /** Decides whether to take a role; default: always. */
  acceptActivation?: (activation: Msg) => boolean | Promise<boolean>;
  random?: () => number;
}

export type SessionState = 'idle' | 'registering' | 'attaching' | 'attached' | 'backoff' | 'lost' | 'failed' | 'stopped';

export interface HeldRole {
  roleKeyWire: string;
  roleKey: Msg;
  epoch: number;
  activationId: string;
  role: Msg | null;
}

export class PresenceSession extends EventEmitter {
  constructor(client: HubClient, options: PresenceSessionOptions);
  readonly agentId: string;
  readonly state: SessionState;
  readonly presenceGeneration: number;
  readonly hubInstanceId: string | null;
  readonly storeFingerprint: string | null;
  readonly attached: boolean;
  readonly roles: HeldRole[];
  /** The fencing token: the acknowledged epoch of a held role. */
  roleEpoch(roleKeyWire?: string): number | undefined;
  start(): Promise<void>;
  stop(options?: { deregister?: boolean }): Promise<void>;
  ackMessages(messageIds: string[]): Promise<Msg>;
  heartbeat(): Promise<Msg>;

  on(event: 'registered' | 'attached' | 'heartbeat' | 'fencing' | 'roleActivation' | 'roleActivationDeclined' | 'roleActivationCancel' | 'roleProbe' | 'roleChange' | 'reservationEnded', listener: (frame: Msg) => void): this;
  on(event: 'message', listener: (delivery: Msg, ack: () => Promise<Msg>) => void): this;
  on(event: 'roleActivated', listener: (e: { activation: Msg; role: Msg | null; epoch: number }) => void): this;
  on(event: 'roleActivationFailed', listener: (e: { activation: Msg; error: HubError }) => void): this;
  on(event: 'roleLost', listener: (e: { roleKeyWire: string; epoch: number; reason: string }) => void): this;
  on(event: 'disconnected', listener: (e: { error: HubError | null; retryInMs: number; waitingForHub?: boolean }) => void): this;
  on(event: 'hubRestarted', listener: (e: { previousHubInstanceId: string | null; hubInstanceId: string | null; reason: string }) => void): this;
  on(event: 'authorityLost', listener: (e: { reason: string; error: HubError; currentPresenceGeneration?: number }) => void): this;
  on(event: 'failed', listener: (error: HubError) => void): this;
  on(event: 'stopped', listener: () => void): this;
  on(event: 'state', listener: (state: SessionState, previous: SessionState) => void): this;
  on(event: string | symbol, listener: (...args: any[]) => void): this;
}

export function duration(ms: number): { seconds: number; nanos: number };
export function durationMs(d: Msg | null | undefined): number;
export function toDate(ts: Msg | null | undefined): Date | null;
export function toStruct(obj: { [key: string]: unknown }): Msg;
export function fromStruct(struct: Msg | null | undefined): { [key: string]: unknown } | null;
export function loadProtos(options?: { protoDir?: string; includeDirs?: string[] }): { packageDefinition: unknown; protoDir: string; includeDirs: string[] };
