import { Button, Tooltip, type ButtonProps } from '@mantine/core'
import type { ComponentPropsWithoutRef, ReactNode } from 'react'
import { useScope } from '../auth/scope'

export const READ_ONLY_HINT = 'Your role in this project is read-only (viewer).'

type Props = ButtonProps & Omit<ComponentPropsWithoutRef<'button'>, keyof ButtonProps> & { children: ReactNode }

/** A button for a write action: disabled, with the reason, when the server says the caller may not write. */
export function WriteButton({ disabled, children, ...props }: Props) {
  const { canWrite } = useScope()
  if (canWrite) return <Button disabled={disabled} {...props}>{children}</Button>
  return (
    <Tooltip label={READ_ONLY_HINT}>
      <span>
        <Button {...props} disabled data-readonly="true" title={READ_ONLY_HINT}>
          {children}
        </Button>
      </span>
    </Tooltip>
  )
}
