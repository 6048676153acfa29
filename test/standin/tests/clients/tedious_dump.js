#!/usr/bin/env node
// tedious_dump: run requests through Node's tedious and print every value in
// the canonical text form shared with dblib_dump.c (see that file).
//
// usage: node tedious_dump.js [options] HOST:PORT USER PASSWORD STEP [STEP...]
//   --db NAME  --packet-size N  --encrypt true|false|strict
//   --ca FILE          validate the server certificate against this CA (PEM);
//                      without it the certificate is trusted unchecked
//   --server-name NAME the name the certificate must carry (default: HOST)
//   --cancel-after N   cancel() the first request after N rows
//   --timeout MS       requestTimeout (tedious cancels with an ATTENTION)
// STEP is a SQL batch (execSqlBatch), or
//   rpc:{"sql": "...", "params": [{"name","type","value","output"}]}  execSql (sp_executesql)
//   prep:{"sql": "...", "params": [...]}   prepare + execute + unprepare
//   tm:begin | tm:commit | tm:rollback     beginTransaction()/commitTransaction()/...
//   reset                                  connection.reset() (RESETCONNECTION on the next request)
'use strict';

const fs = require('fs');
const path = require('path');
const { Connection, Request, TYPES } = require(path.join(__dirname, '..', '..', 'node_modules', 'tedious'));

function hex(buf) { return Buffer.from(buf).toString('hex'); }
function utf8hex(s) { return Buffer.from(String(s), 'utf8').toString('hex'); }
function pad(n, w) { return String(n).padStart(w, '0'); }

function dateUTC(d) {
  return pad(d.getUTCFullYear(), 4) + '-' + pad(d.getUTCMonth() + 1, 2) + '-' + pad(d.getUTCDate(), 2);
}
// 100 ns ticks: milliseconds from the Date plus tedious' nanosecondsDelta.
function time7(d) {
  const delta = Math.round((d.nanosecondsDelta || 0) * 1e7);
  const frac = d.getUTCMilliseconds() * 10000 + delta;
  return pad(d.getUTCHours(), 2) + ':' + pad(d.getUTCMinutes(), 2) + ':' + pad(d.getUTCSeconds(), 2) +
    '.' + pad(frac, 7);
}

function canonical(meta, v) {
  if (v === null || v === undefined) return 'NULL';
  const t = meta.type.name;
  switch (t) {
    case 'Bit': case 'BitN': return 'i:' + (v ? 1 : 0);
    case 'TinyInt': case 'SmallInt': case 'Int': case 'BigInt': case 'IntN': return 'i:' + String(v);
    case 'Real': case 'Float': case 'FloatN': {
      const four = t === 'Real' || meta.dataLength === 4;
      const b = Buffer.alloc(four ? 4 : 8);
      if (four) b.writeFloatBE(v); else b.writeDoubleBE(v);
      return (four ? 'f4:' : 'f8:') + hex(b);
    }
    case 'Decimal': case 'DecimalN': case 'Numeric': case 'NumericN':
    case 'Money': case 'SmallMoney': case 'MoneyN':
      return 'n:' + String(v);
    case 'Date': case 'DateN': return 'd:' + dateUTC(v);
    case 'Time': case 'TimeN': return 't:' + time7(v);
    case 'DateTime2': case 'DateTime2N': return 'dt:' + dateUTC(v) + ' ' + time7(v);
    case 'DateTimeOffset': case 'DateTimeOffsetN': return 'dto:' + dateUTC(v) + ' ' + time7(v);
    case 'SmallDateTime': return 'dt:' + dateUTC(v) + ' ' + time7(v);
    case 'DateTime': case 'DateTimeN':
      if (meta.dataLength === 4) return 'dt:' + dateUTC(v) + ' ' + time7(v);
      return 'dtm:' + dateUTC(v) + ' ' + time7(v).slice(0, 12);
    case 'Char': case 'VarChar': case 'NChar': case 'NVarChar': case 'Text': case 'NText': case 'Xml':
      return 's:' + utf8hex(v);
    case 'Binary': case 'VarBinary': case 'Image': case 'UDT': return 'b:' + hex(v);
    case 'UniqueIdentifier': return 'g:' + String(v).toLowerCase();
    case 'Variant': return 'v:' + utf8hex(v);
    default: return '?' + t + ':' + String(v);
  }
}

function parseArgs(argv) {
  const opts = { db: undefined, packetSize: 4096, encrypt: false, cancelAfter: -1, timeout: 0,
    ca: undefined, serverName: undefined };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--db') opts.db = argv[++i];
    else if (a === '--packet-size') opts.packetSize = Number(argv[++i]);
    else if (a === '--encrypt') { const e = argv[++i]; opts.encrypt = e === 'strict' ? 'strict' : e === 'true'; }
    else if (a === '--cancel-after') opts.cancelAfter = Number(argv[++i]);
    else if (a === '--timeout') opts.timeout = Number(argv[++i]);
    else if (a === '--ca') opts.ca = argv[++i];
    else if (a === '--server-name') opts.serverName = argv[++i];
    else rest.push(a);
  }
  return [opts, rest];
}

const out = [];
function emit(line) { out.push(line); }
function flush() { process.stdout.write(out.join('\n') + (out.length ? '\n' : '')); out.length = 0; }

function addParams(request, params) {
  for (const p of params || []) {
    const type = TYPES[p.type];
    if (!type) throw new Error('unknown tedious type ' + p.type);
    let value = p.value;
    if (p.type === 'VarBinary' || p.type === 'Binary') value = value === null ? null : Buffer.from(value, 'hex');
    const options = {};
    if (p.length !== undefined) options.length = p.length;
    if (p.precision !== undefined) options.precision = p.precision;
    if (p.scale !== undefined) options.scale = p.scale;
    if (p.output) request.addOutputParameter(p.name, type, value, options);
    else request.addParameter(p.name, type, value, options);
  }
}

function runStep(conn, step, index, opts) {
  return new Promise((resolve) => {
    let rows = 0;
    let result = -1;
    const done = (err) => {
      if (err) emit('ERROR ' + (err.code || '') + ' ' + JSON.stringify(err.message));
      emit('BATCHDONE');
      resolve(err);
    };
    if (step === 'reset') {
      conn.reset((err) => done(err));
      return;
    }
    if (step.startsWith('tm:')) {
      const op = step.slice(3);
      const cb = (err) => done(err);
      if (op === 'begin') conn.beginTransaction(cb);
      else if (op === 'commit') conn.commitTransaction(cb);
      else conn.rollbackTransaction(cb);
      return;
    }
    let spec = null;
    let kind = 'batch';
    if (step.startsWith('rpc:') || step.startsWith('prep:')) {
      kind = step.startsWith('rpc:') ? 'rpc' : 'prep';
      spec = JSON.parse(step.slice(kind.length + 1));
    }
    const request = new Request(spec ? spec.sql : step, (err, rowCount) => {
      if (!err) emit('ROWCOUNT ' + rowCount);
      if (kind === 'prep' && !err) {
        conn.unprepare(request);
      }
      done(err);
    });
    if (opts.timeout) request.setTimeout(opts.timeout);
    let cols = null;
    request.on('columnMetadata', (columns) => {
      cols = columns;
      result++;
      emit('RESULT ' + result);
      columns.forEach((c, i) => emit('COL ' + (i + 1) + ' ' + c.type.name + ' ' + c.colName));
    });
    request.on('row', (columns) => {
      emit('ROW ' + rows);
      columns.forEach((c, i) => emit('V ' + (i + 1) + ' ' + canonical(cols[i], c.value)));
      rows++;
      if (opts.cancelAfter >= 0 && index === 0 && rows === opts.cancelAfter) {
        emit('CANCELLED after ' + rows);
        request.cancel();
      }
    });
    request.on('doneInProc', (rowCount) => { if (rowCount !== undefined) emit('COUNT ' + rowCount); });
    request.on('done', (rowCount) => { if (rowCount !== undefined) emit('COUNT ' + rowCount); });
    request.on('returnValue', (name, value, meta) => emit('RETURNVALUE ' + name + ' ' + canonical(meta, value)));
    request.on('infoMessage', (m) => emit('MSG ' + m.number + ' ' + m.class + ' ' + m.state + ' ' + JSON.stringify(m.message)));
    request.on('errorMessage', (m) => emit('MSG ' + m.number + ' ' + m.class + ' ' + m.state + ' ' + JSON.stringify(m.message)));
    if (spec) addParams(request, spec.params);
    if (kind === 'batch') conn.execSqlBatch(request);
    else if (kind === 'rpc') conn.execSql(request);
    else {
      request.on('prepared', () => {
        const values = {};
        for (const p of spec.params || []) values[p.name] = p.value;
        conn.execute(request, values);
      });
      conn.prepare(request);
    }
  });
}

async function main() {
  const [opts, rest] = parseArgs(process.argv.slice(2));
  if (rest.length < 3) {
    console.error('usage: tedious_dump.js [options] HOST:PORT USER PASSWORD STEP...');
    process.exit(2);
  }
  const [hostPort, user, password, ...steps] = rest;
  const [host, port] = hostPort.split(':');
  const conn = new Connection({
    server: host,
    authentication: { type: 'default', options: { userName: user, password } },
    options: {
      port: Number(port), database: opts.db, encrypt: opts.encrypt,
      trustServerCertificate: opts.ca === undefined,
      cryptoCredentialsDetails: opts.ca === undefined ? {} : { ca: fs.readFileSync(opts.ca) },
      serverName: opts.serverName,
      packetSize: opts.packetSize, useUTC: true, rowCollectionOnRequestCompletion: false,
      connectTimeout: 10000, cancelTimeout: 5000, requestTimeout: 0,
    },
  });
  let closed = false;
  let secured = null;
  conn.on('secure', (cleartext) => { secured = cleartext; });
  conn.on('end', () => { closed = true; });
  conn.on('error', (err) => { emit('CONNERROR ' + (err.code || '') + ' ' + JSON.stringify(err.message)); });
  const err = await new Promise((resolve) => conn.connect(resolve));
  if (err) {
    emit('FAIL login ' + (err.code || '') + ' ' + JSON.stringify(err.message));
    flush();
    process.exit(1);
  }
  emit('CONNECTED');
  // which TLS the session got: tedious emits 'secure' once the handshake is done
  if (secured) emit('TLS ' + secured.getProtocol() + ' ' + (secured.getCipher() || {}).name);
  let status = 0;
  for (let i = 0; i < steps.length; i++) {
    const e = await runStep(conn, steps[i], i, opts);
    flush();
    if (e && !(e.code === 'ECANCEL' || e.code === 'ETIMEOUT')) status = 1;
    if (closed) { emit('DEAD'); status = 1; break; }
  }
  conn.close();
  flush();
  process.exitCode = status;
}

main().catch((e) => { emit('EXCEPTION ' + JSON.stringify(String(e && e.stack || e))); flush(); process.exit(3); });
