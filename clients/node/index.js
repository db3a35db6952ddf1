// Copyright 2026 The hermeskill Authors
// SPDX-License-Identifier: Apache-2.0

// hermeskill: the Node client of hermeskilld, the out-of-process kill switch
// for AI agents. See README.md and hermeskilld's docs/protocol.md.

export {
  Client,
  ConfigError,
  ConnectionEvent,
  MAX_TEXT_BYTES,
  MAX_WARNINGS,
  StopError,
  StopEvent,
  WarningEvent,
  isStopError,
  stopErrorOf,
} from './lib/client.js';
export { RawJSON, argsHash, canonicalJSON, rawJSON } from './lib/canonical.js';
export { MAX_MESSAGE } from './lib/wire.js';

export const VERSION = '0.1.0';
