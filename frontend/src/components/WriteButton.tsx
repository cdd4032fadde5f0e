import { Button, Tooltip, type ButtonProps } from '@mantine/core'
import type { ComponentPropsWithoutRef, ReactNode } from 'react'
import { useScope } from '../auth/scope'

export const READ_ONLY_HINT = 'Your role in this project is read-only (viewer).'

type Props = ButtonProps & Omit<ComponentPropsWithoutRef<'button'>, keyof ButtonProps> & {
  children: ReactNode
  allowed?: boolean
  deniedHint?: string
}

/** A button for a write action: disabled, with the reason, when the server says the caller may not write (the
 * project's `can_write`, or `allowed` when another answer of the server decides, with `deniedHint` as the reason). */
export function WriteButton({ disabled, children, allowed, deniedHint, ...props }: Props) {
  const scope = useScope()
  const canWrite = allowed ?? scope.canWrite
  const hint = deniedHint ?? READ_ONLY_HINT
  if (canWrite) return <Button disabled={disabled} {...props}>{children}</Button>
  return (
    <Tooltip label={hint}>
      <span>
        <Button {...props} disabled data-readonly="true" title={hint}>
          {children}
        </Button>
      </span>
    </Tooltip>
  )
}
