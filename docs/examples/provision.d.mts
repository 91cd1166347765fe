/** Types of provision.mjs, for the test that runs it (test/provisioning.test.ts). */
export interface Customer {
  id: string;
  name: string;
}

export interface Provisioned {
  customer: string;
  organizationId: string;
  apiToken: string;
  sessionId: string;
  connectUrl: string;
}

export function provision(options: {
  url: string;
  email: string;
  password: string;
  customers: Customer[];
  redirectUri: string;
  allowedProviders?: string[];
}): Promise<Provisioned[]>;
