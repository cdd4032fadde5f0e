import { Alert, Anchor, Button, Center, Divider, Paper, PasswordInput, Stack, Text, TextInput, Title } from '@mantine/core'
import { useState, type FormEvent } from 'react'
import { Navigate, useNavigate, useSearchParams } from 'react-router'
import { ApiError } from '../api/client'
import { useSession, useSignIn, useVerifyOtp } from '../auth/session'
import { ProblemAlert, fieldError } from '../components/ProblemAlert'

/** A local path to go back to after signing in (never another origin). */
export function safeNext(next: string | null): string {
  return next && next.startsWith('/') && !next.startsWith('//') ? next : '/'
}

export function SignInPage() {
  const session = useSession()
  const navigate = useNavigate()
  const [params] = useSearchParams()
  const next = safeNext(params.get('next'))
  const state = session.data
  if (state?.authenticated && !state.second_factor_needed) return <Navigate to={next} replace />
  return (
    <Center mih="100vh" p="md" component="main">
      <Paper withBorder shadow="sm" p="xl" radius="md" w={400}>
        <SignInForm next={next} onSignedIn={() => navigate(next, { replace: true })} />
      </Paper>
    </Center>
  )
}

/**
 * The sign-in form (e-mail and password, then the authenticator code when the organization asks for one, or the
 * single sign-on button): the sign-in page holds it, and so does the dialog that asks a person whose session ended
 * to sign in again over the screen they were using. `onSignedIn` runs once the session is fully signed in.
 */
export function SignInForm({
  next,
  onSignedIn,
  initialEmail = '',
  title = 'Sign in to gpucloud',
  intro,
}: {
  next: string
  onSignedIn: (email: string | null) => void
  initialEmail?: string
  title?: string
  intro?: string
}) {
  const session = useSession()
  const signIn = useSignIn(initialEmail || null)
  const verify = useVerifyOtp()
  const [email, setEmail] = useState(initialEmail)
  const [password, setPassword] = useState('')
  const [otp, setOtp] = useState('')
  const [askOtp, setAskOtp] = useState(false)

  const state = session.data
  // Signed in with single sign-on but the organization wants a code: verify this session with POST /session/otp.
  const sessionNeedsOtp = state?.authenticated && state.second_factor_needed === 'otp_required'

  const submit = (event: FormEvent) => {
    event.preventDefault()
    if (sessionNeedsOtp) {
      verify.mutate(otp, { onSuccess: (s) => onSignedIn(s.email ?? null) })
      return
    }
    signIn.mutate(
      { email, password, ...(askOtp ? { otp_token: otp } : {}) },
      {
        onSuccess: (s) => {
          if (!s.second_factor_needed) onSignedIn(s.email ?? null)
        },
        onError: (error) => {
          if (error instanceof ApiError && error.code === 'otp_required') setAskOtp(true)
        },
      },
    )
  }

  const error = signIn.error ?? verify.error
  const otpPrompt = error instanceof ApiError && error.code === 'otp_required'
  const showOtp = askOtp || sessionNeedsOtp
  const sso = state?.sso_login_url

  return (
        <form onSubmit={submit} noValidate>
          <Stack>
            <Title order={1} size="h2">
              {title}
            </Title>
            {intro && <Text>{intro}</Text>}
            {state?.second_factor_needed === 'two_factor_required' && (
              <Alert color="yellow">
                Your account must enrol a second factor before it can use the console (POST /api/v1/me/totp/).
              </Alert>
            )}
            {error && !otpPrompt && <ProblemAlert error={error} title="Sign-in failed" shownFields={['email', 'password', 'otp_token']} />}
            {!sessionNeedsOtp && (
              <>
                <TextInput
                  label="E-mail"
                  type="email"
                  autoComplete="username"
                  required
                  value={email}
                  onChange={(e) => setEmail(e.currentTarget.value)}
                  error={fieldError(error, 'email')}
                  disabled={askOtp}
                  data-autofocus
                />
                <PasswordInput
                  label="Password"
                  autoComplete="current-password"
                  required
                  value={password}
                  onChange={(e) => setPassword(e.currentTarget.value)}
                  error={fieldError(error, 'password')}
                  disabled={askOtp}
                />
              </>
            )}
            {showOtp && (
              <TextInput
                label="Authentication code"
                description="The 6-digit code from your authenticator app, or a recovery code."
                autoComplete="one-time-code"
                inputMode="numeric"
                required
                autoFocus
                value={otp}
                onChange={(e) => setOtp(e.currentTarget.value)}
                error={fieldError(error, 'otp_token')}
              />
            )}
            <Button type="submit" loading={signIn.isPending || verify.isPending} fullWidth>
              {showOtp ? 'Verify code' : 'Sign in'}
            </Button>
            {sso && !showOtp && (
              <>
                <Divider label="or" labelPosition="center" />
                <Button component="a" href={`${sso}?next=${encodeURIComponent(next)}`} variant="default" fullWidth>
                  Sign in with single sign-on
                </Button>
              </>
            )}
            <Text size="xs" c="dimmed">
              API access: <Anchor href="/api/v1/docs/">/api/v1/docs/</Anchor>
            </Text>
          </Stack>
        </form>
  )
}
