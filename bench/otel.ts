/**
 * `node --import ./bench/otel.ts bench/http.ts`: starts traces the way main.ts does when the
 * OTEL_* variables ask for them — before the app's modules load, so the instrumentations see
 * them — to measure the token read with traces on (docs/benchmarks.md). Without the variables
 * it loads nothing, like `npm start`.
 */
import { createLogger } from '../src/http/logging.ts';
import { tracesWanted } from '../src/telemetry/tracing.ts';

if (tracesWanted(process.env)) await (await import('../src/telemetry/otel.ts')).startTracing(process.env, createLogger({ level: 'warn' }));
