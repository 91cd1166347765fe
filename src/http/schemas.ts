import { Type } from 'typebox';

/** The error body of CONTRACT.md §2, used as every route's error response schema. */
export const ErrorResponse = Type.Object(
  {
    success: Type.Literal(false),
    error: Type.String(),
    code: Type.String(),
    requestId: Type.String(),
    details: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
  },
  { additionalProperties: false },
);

/** `{"status":"ok"}` / `{"status":"unavailable","reason":…}` of the health routes. */
export const HealthResponse = Type.Object({
  status: Type.String(),
  reason: Type.Optional(Type.String()),
});

