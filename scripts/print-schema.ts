/** npm run schema:print — writes the GraphQL schema's SDL to docs/schema.graphql (CI checks it matches). */
import { writeFileSync } from 'node:fs';
import { printSchema } from 'graphql';
import { graphqlSchema } from '../src/graphql/schema.ts';

const target = new URL('../docs/schema.graphql', import.meta.url);
writeFileSync(target, `${printSchema(graphqlSchema())}\n`);
process.stdout.write(`wrote ${target.pathname}\n`);
