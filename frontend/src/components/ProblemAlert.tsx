import { Alert, List } from '@mantine/core'
import { ApiError } from '../api/client'
import { useSignedInNow } from '../auth/session'
import { isSignedOut } from '../queryClient'

/** The problem+json `detail` of a failed request (and its per-field messages not shown beside a field). A refusal
 * because the session had ended ("Authentication credentials were not provided.") is shown only while it has: once
 * signed in again (the "Sign in again" dialog) it is gone, and the refused action can simply be sent again. */
export function ProblemAlert({ error, title, shownFields = [], color = 'red' }: { error: unknown; title?: string; shownFields?: string[]; color?: string }) {
  const signedIn = useSignedInNow()
  if (!error || (signedIn && isSignedOut(error))) return null
  const problem = error instanceof ApiError ? error : null
  const detail = problem?.detail ?? (error instanceof Error ? error.message : String(error))
  const rest = problem ? Object.entries(problem.errors).filter(([field]) => !shownFields.includes(field)) : []
  return (
    <Alert color={color} title={title ?? 'The request failed'} role="alert" data-testid="problem">
      {detail}
      {rest.length > 0 && (
        <List size="sm" mt="xs">
          {rest.map(([field, messages]) => (
            <List.Item key={field}>
              {field}: {messages.join(' ')}
            </List.Item>
          ))}
        </List>
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
