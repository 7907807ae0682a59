// Types for apns-mock-client (index.js). The shapes follow docs/admin-api.md; records and other
// server documents are typed loosely where the server may add members (the API is extended,
// never renamed).

export interface AdminClientOptions {
  /** The admin base URL; default http://127.0.0.1:2198. */
  url?: string;
  /** The admin token, sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Each request's timeout in milliseconds; default 10000. */
  timeoutMs?: number;
  /**
   * A team ID: every call is scoped to that team (sent as the `APNS-Mock-Team` header); without it
   * calls act on the whole mock.
   */
  team?: string | null;
}

/** The filters of /v1/notifications, /wait and /v1/events; unset ones are left out. */
export interface NotificationFilter {
  token?: string;
  topic?: string;
  pushType?: string;
  apnsId?: string;
  collapseId?: string;
  outcome?: 'accepted' | 'rejected' | 'all';
  reason?: string;
  kind?: 'device' | 'broadcast' | 'channel';
  channelId?: string;
  since?: number;
  limit?: number;
}

/** One recorded request ("The record" in docs/admin-api.md). */
export interface NotificationRecord {
  seq: number;
  kind: 'device' | 'broadcast' | 'channel';
  status: number | null;
  reason: string | null;
  token: string | null;
  topic: string | null;
  apnsId: string | null;
  pushType: string | null;
  headers: Record<string, string>;
  payload: any;
  payloadEncoding: 'json' | 'text' | 'base64' | null;
  action: string | null;
  injected: boolean;
  channelId: string | null;
  [key: string]: any;
}

export interface NotificationPage {
  notifications: NotificationRecord[];
  /** The cursor to pass as `since` next time. */
  next: number;
  /** Records after `next` exist that this page did not look at. */
  more: boolean;
}

export interface WaitOptions {
  /** How many matching records to wait for; default 1. */
  count?: number;
  /** Seconds; default 5 (the server's default), at most 300. */
  timeout?: number;
}

export interface EventsOptions {
  /** Resume after this seq (records the ring still holds are sent first). */
  since?: number;
  /** End the stream after this many records. */
  limit?: number;
  /** At most this many records a second; the rest are reported in `skipped` events. */
  maxRate?: number;
  /** Sent as the Last-Event-ID header; wins over `since`. */
  lastEventId?: string | number;
  /** Aborting it closes the stream; a pending `next()` rejects with the abort reason. */
  signal?: AbortSignal;
}

export type StreamEvent =
  | { id: string | null; type: 'message'; data: NotificationRecord }
  | { id: string | null; type: 'skipped'; data: { skipped: number; firstSeq: number; lastSeq: number } }
  | { id: string | null; type: 'refused-streams'; data: { connectionId: number; cause: string; count: number; [key: string]: any } }
  | { id: string | null; type: string; data: any };

/** A /v1/events response: an async iterable of events. Leaving a `for await` loop closes it. */
export class EventStream implements AsyncIterableIterator<StreamEvent> {
  /** Resolves once the server has subscribed the stream; rejects with AdminError on a bad request. */
  readonly opened: Promise<EventStream>;
  /** The last `id:` seen (a record's seq), for `lastEventId` when reconnecting. */
  readonly lastEventId: string | null;
  next(): Promise<IteratorResult<StreamEvent>>;
  return(): Promise<IteratorResult<StreamEvent>>;
  /** Closes the connection; iteration ends. */
  close(): void;
  [Symbol.asyncIterator](): EventStream;
}

export interface FaultRule {
  match?: {
    token?: string;
    topic?: string;
    pushType?: string;
    kind?: 'device' | 'broadcast' | 'channel';
    channelId?: string;
    connection?: number;
    afterRequests?: number;
    [key: string]: any;
  };
  respond?: { reason: string; status?: number; timestamp?: number; [key: string]: any };
  action?: 'reset' | 'goaway' | 'close' | 'hang' | 'tcp-reset' | 'shrink-streams' | 'ignore-pings';
  delayMs?: number;
  times?: number;
  probability?: number;
  maxConcurrentStreams?: number;
  durationMs?: number;
  [key: string]: any;
}

export interface Fault extends FaultRule {
  id: string;
  remaining: number | null;
  applied: number;
}

export interface Device {
  token: string;
  topic?: string | null;
  environment?: 'sandbox' | 'production' | null;
  unregisteredAt?: string | null;
  timestamp?: number | null;
  reason?: 'Unregistered' | 'ExpiredToken' | null;
}

export interface Channel {
  bundleId: string;
  environment: 'sandbox' | 'production';
  channelId: string;
  messageStoragePolicy: 0 | 1;
}

export interface Clock {
  offsetSeconds: number;
  /** The mock's time, RFC 3339. */
  now: string;
  /** The wall clock, RFC 3339. */
  wallClock: string;
}

export interface Reason {
  reason: string;
  status: number;
  explanation: string;
}

export class AdminClient {
  constructor(options?: AdminClientOptions);
  readonly url: URL;
  /** The team this client is scoped to, or null. */
  readonly team: string | null;
  /** The same mock, URL, token and timeout, scoped to `teamId` (null: unscoped). */
  forTeam(teamId: string | null): AdminClient;
  health(): Promise<{ status: string; ports: Record<string, number | number[]>; reason?: string }>;
  listNotifications(filter?: NotificationFilter): Promise<NotificationPage>;
  /** Resolves to the records; rejects with WaitTimeoutError when fewer than `count` matched in time. */
  waitFor(filter?: NotificationFilter, options?: WaitOptions): Promise<NotificationRecord[]>;
  deleteNotifications(): Promise<void>;
  events(filter?: NotificationFilter, options?: EventsOptions): EventStream;
  addFault(rule: FaultRule): Promise<Fault>;
  addFault(rules: FaultRule[]): Promise<Fault[]>;
  listFaults(): Promise<Fault[]>;
  removeFault(id: string): Promise<void>;
  clearFaults(): Promise<void>;
  registerDevice(device: Device): Promise<Device>;
  listDevices(): Promise<{ policy: string; devices: Device[] }>;
  unregisterDevice(
    token: string,
    options?: { reason?: 'Unregistered' | 'ExpiredToken'; timestamp?: number | string | Date },
  ): Promise<Device>;
  removeDevice(token: string): Promise<void>;
  listChannels(filter?: { bundleId?: string; environment?: 'sandbox' | 'production' }): Promise<Channel[]>;
  createChannel(channel: {
    bundleId: string;
    environment?: 'sandbox' | 'production';
    channelId?: string;
    messageStoragePolicy?: 0 | 1;
  }): Promise<Channel>;
  deleteChannel(channelId: string): Promise<void>;
  clock(): Promise<Clock>;
  advanceClock(seconds: number): Promise<Clock>;
  reset(): Promise<void>;
  stats(): Promise<Record<string, any>>;
  reasons(): Promise<Reason[]>;
  caPem(): Promise<string>;
  metrics(): Promise<string>;
  /** POST /v1/teams: the team as listed; AdminError 400 (the field at fault) or 409 (taken). */
  createTeam(team: TeamDefinition): Promise<Team>;
  /** GET /v1/teams: configured teams first, then those added. */
  listTeams(): Promise<Team[]>;
  /** DELETE /v1/teams/{teamId}: AdminError 404 (unknown) or 409 (a team of the configuration). */
  deleteTeam(teamId: string): Promise<void>;
  /** Creates a team with a fresh P-256 key (random team and key IDs unless given). */
  createTemporaryTeam(options: TemporaryTeamOptions): Promise<TemporaryTeam>;
}

/** A non-2xx answer; `message` is the server's `{"error"}` text unchanged. */
export class AdminError extends Error {
  readonly status: number;
  readonly method: string;
  readonly path: string;
  /** The raw response body. */
  readonly body: string;
}

/** waitFor's 408: fewer than `expected` records matched in time. */
export class WaitTimeoutError extends Error {
  readonly status: 408;
  readonly matched: number;
  readonly expected: number;
  readonly records: NotificationRecord[];
  readonly page: NotificationPage;
}

/** A team to create (POST /v1/teams). */
export interface TeamDefinition {
  /** 10 uppercase letters and digits. */
  teamId: string;
  /** At least one bundle ID; none of another team's. */
  apps: string[];
  keys?: TeamKeyDefinition[];
  devices?: TeamDevices;
}

export interface TeamKeyDefinition {
  keyId: string;
  /** A P-256 key given inline: the private `.p8` text or the public PEM. */
  pem: string;
  environment?: 'any' | 'sandbox' | 'production';
  /** A subset of the team's apps; default all of them. */
  topics?: string[];
  relatedKeyId?: string;
}

export interface TeamDevices {
  /** Absent: the mock's policy applies to the team's pushes. */
  policy?: 'open' | 'registered';
  tokens?: Device[];
}

/** A team as GET /v1/teams lists it. */
export interface Team {
  teamId: string;
  apps: string[];
  /** `topics` empty: every app of the team; `relatedKeyId` absent when there is none. */
  keys: { keyId: string; environment: string; topics: string[]; relatedKeyId?: string | null; [key: string]: any }[];
  /** `policy` absent (or null) when the mock's policy applies. */
  devices: { policy?: 'open' | 'registered' | null; count: number };
  source: 'configuration' | 'api';
  [key: string]: any;
}

export interface TemporaryTeamOptions {
  /** Bundle IDs no other team has. */
  apps: string[] | string;
  devices?: TeamDevices;
  /** The key's environment; default `any`. */
  environment?: 'any' | 'sandbox' | 'production';
  /** Default: random, 10 uppercase letters and digits. */
  teamId?: string;
  /** Default: random, 10 uppercase letters and digits. */
  keyId?: string;
}

/** A team made by `createTemporaryTeam`; `delete()` (or `await using`) deletes it. */
export class TemporaryTeam {
  readonly teamId: string;
  readonly keyId: string;
  /** The private key, PKCS #8 PEM (as a `.p8` file holds it). */
  readonly privateKeyPem: string;
  readonly apps: string[];
  /** The team as the mock listed it when it was created. */
  readonly team: Team;
  /** An AdminClient scoped to this team. */
  readonly admin: AdminClient;
  readonly deleted: boolean;
  /** An ES256 provider token: iss the team, kid the key, iat now (or `issuedAt`, seconds or a Date). */
  providerToken(options?: { issuedAt?: number | Date }): string;
  /** Deletes the team (once; already gone counts as deleted). */
  delete(): Promise<void>;
}

/** An ES256 provider token signed with the P-256 private key `key` (a `.p8` file's text). */
export function providerToken(options: {
  /** PEM text, a Buffer of it, or a `crypto.KeyObject` (typed loosely: no dependency on Node's types). */
  key: string | Uint8Array | object;
  keyId: string;
  teamId: string;
  /** Seconds since the epoch, or a Date; default now. */
  issuedAt?: number | Date;
}): string;

/** A random team or key ID: 10 uppercase letters and digits. */
export function randomId(): string;
