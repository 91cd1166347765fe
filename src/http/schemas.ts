import { Type } from 'typebox';
import { ERROR_CODES, type ErrorCode } from '../ground/errors.ts';

/** Every code of the one error table (docs/contract.md §2): what `code` of an error body can be. */
export const ErrorCodeSchema = Type.Unsafe<ErrorCode>({
  type: 'string',
  enum: Object.keys(ERROR_CODES),
  description: 'What failed, one of the codes of docs/contract.md §2; `error` says it for people',
});

/** The error body of docs/contract.md §2, used as every route's error response schema. */
export const ErrorResponse = Type.Object(
  {
    success: Type.Literal(false),
    error: Type.String(),
    code: ErrorCodeSchema,
    requestId: Type.String(),
    details: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }), { description: 'For input errors: which field or argument failed, and why' })),
  },
  { additionalProperties: false },
);

/** `{"status":"ok"}` / `{"status":"unavailable","reason":…}` of the health routes. */
export const HealthResponse = Type.Object({
  status: Type.String(),
  reason: Type.Optional(Type.String()),
});
