import { Alert, Group, Paper, Stack, Title } from '@mantine/core'
import type { FormEvent, ReactNode } from 'react'
import { ProblemAlert } from './ProblemAlert'
import { WriteButton } from './WriteButton'

/**
 * A create form in its own bordered section, labelled by its heading: `title` (an h3 with `id`), `intro` below it,
 * the server's problem+json (`error`, titled `errorTitle`; the messages for `fields` are shown on their inputs
 * instead), the inputs (`children`) and the submit button (`submitLabel`, a WriteButton: disabled with the reason
 * when the caller may not write; `allowed`/`deniedHint` when another answer of the server decides). `submit`
 * replaces the button where the form needs another. `notice`: what the last submit did (e.g. "Invitation sent to
 * …"), shown in a status line.
 */
export function CreateForm({ id, title, intro, error, errorTitle, fields, onSubmit, submitLabel, loading, allowed,
  deniedHint, submitDisabled, submit, notice, children }: {
  id: string
  title: ReactNode
  intro?: ReactNode
  error: unknown
  errorTitle: string
  fields: string[]
  onSubmit: (event: FormEvent) => void
  submitLabel?: string
  loading?: boolean
  allowed?: boolean
  deniedHint?: string
  submitDisabled?: boolean
  submit?: ReactNode
  notice?: ReactNode
  children: ReactNode
}) {
  return (
    <Paper withBorder p="md" component="section" aria-labelledby={id}>
      <form onSubmit={onSubmit} noValidate>
        <Stack gap="sm">
          <Title order={3} size="h4" id={id}>
            {title}
          </Title>
          {intro}
          {notice && !error && <Alert color="teal" role="status" data-testid="create-notice">{notice}</Alert>}
          <ProblemAlert error={error} title={errorTitle} shownFields={fields} />
          {children}
          <Group>
            {submit ?? (
              <WriteButton type="submit" loading={loading} allowed={allowed} deniedHint={deniedHint} disabled={submitDisabled}>
                {submitLabel}
              </WriteButton>
            )}
          </Group>
        </Stack>
      </form>
    </Paper>
  )
}
