import { Alert, Code, List, Text } from '@mantine/core'
import { ApiError } from '../api/client'
import { useSignedInNow } from '../auth/session'
import { isSignedOut } from '../queryClient'

/** The problem+json `detail` of a failed request (and its per-field messages not shown beside a field). A refusal
 * because the session had ended ("Authentication credentials were not provided.") is shown only while it has: once
 * signed in again (the "Sign in again" dialog) it is gone, and the refused action can simply be sent again. */
/** The alert's heading for a refusal of HTTP `status` (no status: the request did not reach the service): what kind
 * of refusal it is, so the person knows whether to fix the form, ask for a role, wait or retry. */
export function problemTitle(status: number | null): string {
  if (status == null) return 'The service could not be reached'
  if (status === 400 || status === 422) return 'Some of what was entered cannot be used'
  if (status === 401) return 'Your session has ended'
  if (status === 403) return 'Your role does not allow this'
  if (status === 404) return 'Not found'
  if (status === 409) return 'Not possible in the current state'
  if (status === 429) return 'Too many requests: wait a moment, then try again'
  if (status >= 500) return 'The service failed: try again later'
  return 'The request was refused'
}

/** A field name of the API ("security_group_ids") in words ("Security group ids"). */
const fieldWords = (field: string) => (field.charAt(0).toUpperCase() + field.slice(1)).replace(/_/g, ' ')

export function ProblemAlert({ error, title, shownFields = [], color = 'red' }: { error: unknown; title?: string; shownFields?: string[]; color?: string }) {
  const signedIn = useSignedInNow()
  if (!error || (signedIn && isSignedOut(error))) return null
  const problem = error instanceof ApiError ? error : null
  const detail = problem?.detail ?? (error instanceof Error ? error.message : String(error))
  const rest = problem ? Object.entries(problem.errors).filter(([field]) => !shownFields.includes(field)) : []
  return (
    <Alert color={color} title={title ?? problemTitle(problem ? problem.status : null)} role="alert" data-testid="problem">
      {detail}
      {rest.length > 0 && (
        <List size="sm" mt="xs">
          {rest.map(([field, messages]) => (
            <List.Item key={field}>
              {fieldWords(field)}: {messages.join(' ')}
            </List.Item>
          ))}
        </List>
      )}
      {problem && problem.status >= 500 && problem.requestId && (
        <Text size="xs" mt="xs" c="dimmed" data-testid="problem-request-id">
          Request id: <Code style={{ userSelect: 'all' }}>{problem.requestId}</Code>
        </Text>
      )}
    </Alert>
  )
}

/** The first message the API gave for `field` (in `errors`), for a form field's `error` prop. */
export function fieldError(error: unknown, field: string): string | undefined {
  if (!(error instanceof ApiError)) return undefined
  const messages = error.errors[field]
  return messages && messages.length ? messages.join(' ') : undefined
}
