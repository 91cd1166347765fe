/**
 * The API reference as Markdown (docs/api.md), rendered from the served OpenAPI document so it
 * cannot say anything the document does not: one section per tag, one entry per operation with
 * its credentials, parameters, body fields, answers and error codes. `npm run docs:api` writes
 * it; a test fails when the committed file drifts from the routes.
 */

interface Schema {
  $ref?: string;
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
}

interface Operation {
  operationId?: string;
  summary?: string;
  description?: string;
  tags?: string[];
  security?: Record<string, string[]>[];
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema?: Schema }[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: Schema }> }>;
}

interface Document {
  info?: { title?: string };
  tags?: { name: string; description?: string }[];
  paths?: Record<string, Record<string, Operation>>;
  components?: { schemas?: Record<string, Schema> };
  security?: Record<string, string[]>[];
}

const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

/** The document's schema a `$ref` names, or the schema itself. */
function resolve(document: Document, schema: Schema | undefined): Schema | undefined {
  if (!schema?.$ref) return schema;
  return document.components?.schemas?.[schema.$ref.split('/').at(-1) ?? ''];
}

/** A schema's type in a few characters: `string`, `integer[]`, `ProviderView`, `a | b`. */
function typeOf(document: Document, schema: Schema | undefined): string {
  if (!schema) return 'any';
  if (schema.$ref) return schema.$ref.split('/').at(-1) ?? 'object';
  if (schema.const !== undefined) return JSON.stringify(schema.const);
  if (schema.enum) return schema.enum.map((value) => JSON.stringify(value)).join(' \\| ');
  const union = schema.anyOf ?? schema.oneOf;
  if (union) return union.map((member) => typeOf(document, member)).join(' \\| ');
  if (schema.type === 'array') return `${typeOf(document, schema.items)}[]`;
  if (Array.isArray(schema.type)) return schema.type.join(' \\| ');
  return schema.type ?? 'object';
}

const cell = (text: string | undefined) => (text ?? '').replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim();

function credentials(document: Document, operation: Operation): string {
  const security = operation.security ?? document.security ?? [];
  const schemes = [...new Set(security.flatMap((entry) => Object.keys(entry)))];
  if (schemes.length === 0) return 'none (public)';
  return schemes.map((scheme) => (scheme === 'bearerAuth' ? 'bearer token' : scheme === 'sessionCookie' ? 'session cookie (with the CSRF header)' : scheme)).join(' or ');
}

function fieldsTable(document: Document, schema: Schema | undefined): string[] {
  const resolved = resolve(document, schema);
  const properties = Object.entries(resolved?.properties ?? {});
  if (properties.length === 0) return [];
  const required = new Set(resolved?.required ?? []);
  return [
    '| field | type | required | description |',
    '|---|---|---|---|',
    ...properties.map(([name, property]) => `| \`${name}\` | ${cell(typeOf(document, property))} | ${required.has(name) ? 'yes' : ''} | ${cell(property.description)} |`),
    '',
  ];
}

/** The §2 codes an error answer may carry, from its schema's `code` enum when it narrows it. */
function answers(document: Document, operation: Operation): string[] {
  return Object.entries(operation.responses ?? {}).map(([status, response]) => {
    const schema = resolve(document, response.content?.['application/json']?.schema);
    const body = schema?.properties ? ` — \`{${Object.keys(schema.properties).join(', ')}}\`` : '';
    return `- **${status}** ${cell(response.description)}${body}`;
  });
}

function operationSection(document: Document, method: string, path: string, operation: Operation): string[] {
  const lines = [`### \`${method.toUpperCase()} ${path}\``, ''];
  if (operation.summary) lines.push(cell(operation.summary), '');
  if (operation.description && operation.description !== operation.summary) lines.push(operation.description.trim(), '');
  lines.push(`- operationId: \`${operation.operationId ?? ''}\``, `- credentials: ${credentials(document, operation)}`, '');
  const parameters = (operation.parameters ?? []).filter((parameter) => parameter.in !== 'header' || parameter.name.toLowerCase() !== 'x-request-id');
  if (parameters.length > 0) {
    lines.push('| parameter | in | type | required | description |', '|---|---|---|---|---|');
    for (const parameter of parameters) {
      lines.push(`| \`${parameter.name}\` | ${parameter.in} | ${cell(typeOf(document, parameter.schema))} | ${parameter.required ? 'yes' : ''} | ${cell(parameter.description)} |`);
    }
    lines.push('');
  }
  const body = operation.requestBody?.content;
  if (body) {
    const [type, media] = Object.entries(body)[0] ?? [];
    lines.push(`Body (\`${type}\`):`, '');
    const table = fieldsTable(document, media?.schema);
    lines.push(...(table.length > 0 ? table : [`${typeOf(document, media?.schema)}`, '']));
  }
  lines.push('Answers:', '', ...answers(document, operation), '');
  return lines;
}

/** Renders `document` (an OpenAPI 3.1 document as `/api-docs` serves it) as the Markdown reference. */
export function renderApiReference(document: Document): string {
  const byTag = new Map<string, { method: string; path: string; operation: Operation }[]>();
  for (const [path, item] of Object.entries(document.paths ?? {})) {
    for (const method of METHODS) {
      const operation = item[method];
      if (!operation) continue;
      const tag = operation.tags?.[0] ?? 'other';
      byTag.set(tag, [...(byTag.get(tag) ?? []), { method, path, operation }]);
    }
  }
  const descriptions = new Map((document.tags ?? []).map((tag) => [tag.name, tag.description]));
  const lines = [
    '# API reference',
    '',
    '<!-- Generated from the OpenAPI document (GET /api-docs) by `npm run docs:api`; a test fails when it drifts. Do not edit by hand. -->',
    '',
    'Every answer is JSON and carries `X-Request-ID`; every error is `{success: false, error, code, requestId}` (plus `details` for input errors), `code` one of docs/contract.md §2\'s codes (the `Error` schema below). Webhook events: docs/webhooks.md. The same document, browsable: `GET /docs`.',
    '',
  ];
  for (const tag of [...byTag.keys()].sort()) {
    lines.push(`## ${tag}`, '');
    const description = descriptions.get(tag);
    if (description) lines.push(description, '');
    const operations = (byTag.get(tag) ?? []).sort((a, b) => a.path.localeCompare(b.path) || METHODS.indexOf(a.method) - METHODS.indexOf(b.method));
    for (const { method, path, operation } of operations) lines.push(...operationSection(document, method, path, operation));
  }
  lines.push('## Shared shapes', '');
  for (const [name, schema] of Object.entries(document.components?.schemas ?? {}).sort(([a], [b]) => a.localeCompare(b))) {
    lines.push(`### \`${name}\``, '');
    if (schema.description) lines.push(cell(schema.description), '');
    const table = fieldsTable(document, schema);
    lines.push(...(table.length > 0 ? table : [`${typeOf(document, schema)}`, '']));
  }
  return `${lines.join('\n').replace(/\n{3,}/g, '\n\n').trimEnd()}\n`;
}
