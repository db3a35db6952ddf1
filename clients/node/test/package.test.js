// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// The npm package: packed, installed offline into a project of its own and
// imported there by its name.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { shortTempDir } from './helpers.js';

const run = promisify(execFile);
const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8'));
const tmp = shortTempDir();
after(() => tmp.cleanup());

const npm = (args, cwd) => run('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
  cwd, timeout: 60_000, env: { ...process.env, npm_config_update_notifier: 'false' },
});

test('the manifest: no dependencies, ESM with types, Node >= 18', async () => {
  assert.equal(manifest.name, 'hermeskill');
  assert.equal(manifest.type, 'module');
  assert.equal(manifest.license, 'Apache-2.0');
  assert.equal(manifest.engines.node, '>=18');
  assert.equal(manifest.dependencies, undefined);
  assert.deepEqual(manifest.exports['.'], { types: './index.d.ts', default: './index.js' });
  const { VERSION } = await import('../index.js');
  assert.equal(VERSION, manifest.version);
  assert.equal(fs.readFileSync(path.join(PKG, 'LICENSE'), 'utf8'), fs.readFileSync(path.join(PKG, '..', '..', 'LICENSE'), 'utf8'),
    "the package's LICENSE is the repository's");
});

test('npm pack, npm install --offline of the tarball, import by name', async () => {
  const { stdout } = await npm(['pack', '--json', '--pack-destination', tmp.dir], PKG);
  const [packed] = JSON.parse(stdout);
  const files = packed.files.map((f) => f.path).sort();
  assert.deepEqual(files, ['LICENSE', 'README.md', 'index.d.ts', 'index.js', 'lib/canonical.js', 'lib/client.js', 'lib/connection.js', 'lib/wire.js', 'package.json']);
  const project = path.join(tmp.dir, 'project');
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'agent', version: '1.0.0', private: true, type: 'module' }));
  await npm(['install', '--offline', path.join(tmp.dir, packed.filename)], project);
  const script = `
    import { Client, argsHash, VERSION } from 'hermeskill';
    const hk = Client.fromEnv();
    console.log(JSON.stringify({ VERSION, supervised: hk.supervised, ready: hk.ready(), hash: argsHash({ q: 'a<b', n: 1 }) }));
  `;
  const env = { ...process.env };
  delete env.HERMESKILL_STREAM_SOCKET;
  const out = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: project, env, timeout: 30_000 });
  assert.deepEqual(JSON.parse(out.stdout), {
    VERSION: manifest.version, supervised: false, ready: false, hash: '6802a7c2b17e87b4a48247e8a05a547826899abba22624e4123454068da8f6eb',
  });
});
