import { PGlite } from '@electric-sql/pglite';
let t=performance.now();
const a = await PGlite.create();
console.log('create', performance.now()-t); t=performance.now();
await a.exec('create table x(a int); insert into x values (1)');
const blob = await a.dumpDataDir('none');
console.log('dump', performance.now()-t, blob.size); t=performance.now();
for (let i=0;i<3;i++){ t=performance.now();
const b = await PGlite.create({loadDataDir: blob});
console.log('load', performance.now()-t, (await b.query('select * from x')).rows); }
