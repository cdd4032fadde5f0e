import type { ReactNode } from 'react'
import type { Remove } from '../hooks/useRemove'
import { ConfirmButton } from './ConfirmButton'

/** A row's destructive action (delete, revoke, release, remove): a small red outline button that asks first, then
 * runs `remove` (a `useRemove`) for `target`, loading while that row's request is in flight. */
export function DeleteButton<K>({ remove, target, label = 'Delete', name, title, message, confirmLabel, allowed,
  deniedHint }: {
  remove: Remove<K>
  target: K
  label?: string
  /** the accessible name, e.g. "Delete key laptop" */
  name: string
  title: string
  message: ReactNode
  confirmLabel?: string
  allowed?: boolean
  deniedHint?: string
}) {
  return (
    <ConfirmButton
      label={label}
      aria-label={name}
      title={title}
      message={message}
      confirmLabel={confirmLabel}
      color="red.9"
      variant="outline"
      size="xs"
      allowed={allowed}
      deniedHint={deniedHint}
      loading={remove.isRemoving(target)}
      onConfirm={() => remove.mutate(target)}
    />
  )
}
