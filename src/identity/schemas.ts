import { Type } from 'typebox';

export const UserSchema = Type.Object({ id: Type.String(), email: Type.String(), name: Type.String() });
export const OrganizationSchema = Type.Object({ id: Type.String(), name: Type.String() });
export const OrganizationWithRoleSchema = Type.Object({
  id: Type.String(),
  name: Type.String(),
  role: Type.Union([Type.Literal('owner'), Type.Literal('admin'), Type.Literal('member')]),
});

/** The body of login and of an organization switch. */
export const SessionResponse = Type.Object({
  success: Type.Literal(true),
  accessToken: Type.String(),
  tokenType: Type.Literal('Bearer'),
  expiresAt: Type.String({ format: 'date-time' }),
  user: UserSchema,
  organizationId: Type.String(),
});

export const Email = Type.String({ format: 'email', minLength: 3, maxLength: 254 });
export const Password = Type.String({ minLength: 12, maxLength: 256, description: '12–256 characters' });
