import { Button, Group, Modal, Text, type ButtonProps } from '@mantine/core'
import { useDisclosure } from '@mantine/hooks'
import { useRef, type ReactNode } from 'react'
import { useScope } from '../auth/scope'
import { keepFocusNear } from '../hooks/keepFocusNear'
import { READ_ONLY_HINT } from './WriteButton'

/** A write action that asks first (a modal; Escape or Cancel keeps things as they are). Enabled when the project
 * is writable, or when `allowed` (another answer of the server, e.g. an organization's `can_manage_members`) says
 * so; `deniedHint` is the reason shown otherwise. The dialog gives the focus back to the button; once confirmed,
 * while the button waits for its request or after it went with its row, the focus stays in its table (or section)
 * instead of falling to the top of the page. Each opening of the dialog confirms once: the second click of a double
 * click on the confirm button (the dialog is still closing) calls `onConfirm` no second time, so a confirmed action
 * sends one request; pass the request's `loading` so the button stays busy (and cannot reopen) until it answers. */
export function ConfirmButton({ label, title, message, confirmLabel, onConfirm, loading, disabled, color, allowed, deniedHint, ...props }: ButtonProps & {
  label: string
  title: string
  message: ReactNode
  confirmLabel?: string
  onConfirm: () => void
  loading?: boolean
  allowed?: boolean
  deniedHint?: string
}) {
  const [opened, { open, close }] = useDisclosure(false)
  const scope = useScope()
  const canWrite = allowed ?? scope.canWrite
  const trigger = useRef<HTMLButtonElement>(null)
  const confirmed = useRef(false)
  return (
    <>
      <Button
        {...props}
        ref={trigger}
        color={color}
        onClick={() => { confirmed.current = false; open() }}
        disabled={disabled || !canWrite}
        title={canWrite ? undefined : deniedHint ?? READ_ONLY_HINT}
        loading={loading}
      >
        {label}
      </Button>
      <Modal opened={opened} onClose={close} title={title} centered closeButtonProps={{ "aria-label": "Close" }}>
        <Text mb="lg">{message}</Text>
        <Group justify="flex-end">
          <Button variant="default" onClick={close}>
            Cancel
          </Button>
          <Button
            color={color}
            data-autofocus
            onClick={() => {
              if (confirmed.current) return
              confirmed.current = true
              if (trigger.current) keepFocusNear(trigger.current)
              close()
              onConfirm()
            }}
          >
            {confirmLabel ?? label}
          </Button>
        </Group>
      </Modal>
    </>
  )
}
