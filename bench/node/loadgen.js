#!/usr/bin/env node
// A closed-loop gRPC load generator for windowstore that shares no code with the project: Node's
// @grpc/grpc-js and @grpc/proto-loader over the project's .proto (and the standard
// grpc.health.v1 Health service, described inline below).
//
//   node loadgen.js --target 127.0.0.1:50051 --method health --concurrency 16 --duration 5 --warmup 1
//   node loadgen.js --target 127.0.0.1:50051 --method query \
//       --query 'SELECT SUM(bytes) FROM p [RANGE 100 SUBWINDOWS]' --concurrency 16 --duration 5
//
// Each of `concurrency` callers sends one call, waits for its answer and sends the next. Calls
// finished during the warm-up are not counted; the clock then runs for `duration` seconds and the
// callers stop. Prints one JSON line:
//   {calls, seconds, calls_per_s, p50_ms, p99_ms, errors, ...}
// plus, to tell whether this process was the bottleneck: client_cpu (CPU seconds this process used
// per wall-clock second of the measurement: 1.0 is a full core) and event_loop_utilization (the
// fraction of the time the event loop was busy rather than waiting for the network).
//
// Channels: by default every caller has its own channel with its own connection
// ('grpc.use_local_subchannel_pool'; without it grpc-js shares one connection between channels
// with the same target and options), as independent clients would. --channels N spreads the
// callers over N channels instead (--channels 1: all on one HTTP/2 connection).
'use strict';

const path = require('path');
const { performance } = require('perf_hooks');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const USAGE = `usage: node loadgen.js --target HOST:PORT --method health|query [--query TEXT]
       [--concurrency 16] [--duration 5] [--warmup 1] [--channels N (default: one per caller)]
       [--deadline-ms 10000] [--proto-root DIR] [--marks (print "measuring"/"measured" on stderr)]`;

function parseArgs(argv) {
  const opts = {
    target: '127.0.0.1:50051', method: 'health', query: '', concurrency: 16, duration: 5, warmup: 1,
    channels: 0, deadlineMs: 10000, protoRoot: path.join(__dirname, '..', '..', 'proto'), marks: false,
  };
  const names = {
    '--target': ['target', String], '--method': ['method', String], '--query': ['query', String],
    '--concurrency': ['concurrency', Number], '--duration': ['duration', Number], '--warmup': ['warmup', Number],
    '--channels': ['channels', Number], '--deadline-ms': ['deadlineMs', Number], '--proto-root': ['protoRoot', String],
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      console.log(USAGE);
      process.exit(0);
    }
    if (a === '--marks') {
      opts.marks = true;
      continue;
    }
    const [flag, inline] = a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const spec = names[flag];
    if (!spec) fail(`unknown argument ${a}`);
    const raw = inline !== undefined ? inline : argv[++i];
    if (raw === undefined) fail(`${flag} needs a value`);
    const value = spec[1](raw);
    if (spec[1] === Number && !Number.isFinite(value)) fail(`${flag}: not a number: ${raw}`);
    opts[spec[0]] = value;
  }
  if (!['health', 'query'].includes(opts.method)) fail(`--method must be health or query, not ${opts.method}`);
  if (opts.method === 'query' && !opts.query) fail('--method query needs --query TEXT');
  if (!(opts.concurrency >= 1) || !(opts.duration > 0) || !(opts.warmup >= 0)) fail('bad --concurrency, --duration or --warmup');
  opts.concurrency = Math.floor(opts.concurrency);
  opts.channels = opts.channels >= 1 ? Math.min(Math.floor(opts.channels), opts.concurrency) : opts.concurrency;
  return opts;
}

function fail(msg) {
  console.error(`loadgen: ${msg}\n${USAGE}`);
  process.exit(2);
}

const LOADER_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: false, oneofs: true };

// grpc.health.v1 (https://github.com/grpc/grpc/blob/master/doc/health-checking.md), as a
// protobuf.js JSON descriptor: the server serves it, the project ships no .proto for it.
const HEALTH_JSON = {
  nested: { grpc: { nested: { health: { nested: { v1: { nested: {
    HealthCheckRequest: { fields: { service: { type: 'string', id: 1 } } },
    HealthCheckResponse: {
      fields: { status: { type: 'ServingStatus', id: 1 } },
      nested: { ServingStatus: { values: { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } } },
    },
    Health: { methods: { Check: { requestType: 'HealthCheckRequest', responseType: 'HealthCheckResponse' } } },
  } } } } } } },
};

function makeCall(opts) {
  // Returns {Ctor, invoke(client, deadline, cb), check(response) -> error string or null}.
  if (opts.method === 'health') {
    const pkg = grpc.loadPackageDefinition(protoLoader.fromJSON(HEALTH_JSON, LOADER_OPTIONS));
    const request = { service: '' };
    return {
      Ctor: pkg.grpc.health.v1.Health,
      invoke: (c, deadline, cb) => c.Check(request, { deadline }, cb),
      check: (r) => (r.status === 'SERVING' ? null : `health status ${r.status}`),
    };
  }
  const def = protoLoader.loadSync('windowstore/v1/windowstore.proto', { ...LOADER_OPTIONS, includeDirs: [opts.protoRoot] });
  const pkg = grpc.loadPackageDefinition(def);
  const request = { text: opts.query };
  return {
    Ctor: pkg.windowstore.v1.WindowStoreService,
    invoke: (c, deadline, cb) => c.Query(request, { deadline }, cb),
    check: (r) => (r && r.answer ? null : 'no answer in the response'),
  };
}

function percentile(sorted, q) {
  if (sorted.length === 0) return null;
  const pos = (sorted.length - 1) * q;  // linear interpolation, as numpy.percentile does
  const lo = Math.floor(pos);
  const hi = Math.min(lo + 1, sorted.length - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

function main() {
  const opts = parseArgs(process.argv.slice(2));
  const call = makeCall(opts);
  const channelOptions = {
    'grpc.use_local_subchannel_pool': 1,  // a connection per channel, not one shared by all
    'grpc.max_receive_message_length': 64 * 1024 * 1024,
    // Less client work per call: no channelz bookkeeping, no retry buffering (a failed call is
    // counted as an error, never retried). No keepalive pings either (grpc-js sends none unless
    // grpc.keepalive_time_ms is set): runs last seconds, and pings the server did not permit would
    // get the connection closed (GOAWAY too_many_pings).
    'grpc.enable_channelz': 0,
    'grpc.enable_retries': 0,
  };
  const clients = [];
  for (let i = 0; i < opts.channels; i++) {
    clients.push(new call.Ctor(opts.target, grpc.credentials.createInsecure(), channelOptions));
  }
  // A hard stop whatever happens: every run is bounded in time.
  const hardStop = setTimeout(() => {
    console.error('loadgen: did not finish in time');
    process.exit(3);
  }, (opts.warmup + opts.duration) * 1000 + opts.deadlineMs + 15000);

  let phase = 'warmup';
  let latencies = [];
  let calls = 0;
  let errors = 0;
  const errorCodes = {};
  let firstError = null;
  let sample = null;
  let t0 = 0;
  let t1 = 0;
  let cpu0 = null;
  let elu0 = null;
  let inFlight = 0;
  let cpu = null;
  let elu = null;

  function finish() {
    const seconds = (t1 - t0) / 1000;
    latencies.sort((a, b) => a - b);
    const out = {
      calls, seconds, calls_per_s: calls / seconds,
      p50_ms: percentile(latencies, 0.5), p99_ms: percentile(latencies, 0.99), errors,
      error_codes: errorCodes, first_error: firstError,
      method: opts.method, query: opts.method === 'query' ? opts.query : null,
      concurrency: opts.concurrency, channels: opts.channels,
      client_cpu: (cpu.user + cpu.system) / 1e6 / seconds,
      event_loop_utilization: elu.utilization,
      sample_response: sample,
    };
    for (const c of clients) c.close();
    clearTimeout(hardStop);
    process.stdout.write(JSON.stringify(out) + '\n');
  }

  function caller(client) {
    if (phase === 'done') {
      if (--inFlight === 0) finish();
      return;
    }
    const start = performance.now();
    call.invoke(client, opts.deadlineMs > 0 ? new Date(Date.now() + opts.deadlineMs) : Infinity, (err, response) => {
      const end = performance.now();
      const counted = phase === 'measure';  // completions during the measured seconds
      let bad = err ? `${grpc.status[err.code] || err.code}` : call.check(response);
      if (bad === null && sample === null) sample = response;
      if (counted) {
        if (bad === null) {
          calls++;
          latencies.push(end - start);
        } else {
          errors++;
          errorCodes[bad] = (errorCodes[bad] || 0) + 1;
          if (firstError === null) firstError = err ? err.details || err.message : bad;
        }
      }
      if (err && err.code === grpc.status.UNAVAILABLE) {
        setTimeout(() => caller(client), 10);  // no hot loop against a server that is not there
      } else {
        caller(client);
      }
    });
  }

  // Start the callers; switch to the measured phase after the warm-up, stop after the duration.
  inFlight = opts.concurrency;
  for (let i = 0; i < opts.concurrency; i++) caller(clients[i % clients.length]);
  setTimeout(() => {
    phase = 'measure';
    t0 = performance.now();
    cpu0 = process.cpuUsage();
    elu0 = performance.eventLoopUtilization();
    if (opts.marks) process.stderr.write('measuring\n');
    setTimeout(() => {
      t1 = performance.now();
      cpu = process.cpuUsage(cpu0);
      elu = performance.eventLoopUtilization(elu0);
      phase = 'done';  // calls still in flight finish uncounted; then the callers stop
      if (opts.marks) process.stderr.write('measured\n');
    }, opts.duration * 1000);
  }, opts.warmup * 1000);
}

main();
