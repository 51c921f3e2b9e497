<#
.SYNOPSIS
    Run gsbd (the gsb server) inside WSL2 from Windows: at logon, on demand, supervised.

.DESCRIPTION
    gsb-wsl.ps1 <command> [options]

    Commands:
      install    Register gsbd to start at Windows logon (a Task Scheduler task by
                 default, or the HKCU Run entry with -Method Run) and start it now.
      uninstall  Stop gsbd and remove the task / Run entry.
      start      Start gsbd now (through the task when installed) and wait for /health.
      stop       Stop gsbd (SIGTERM: it finishes in-flight requests) and its supervisor.
      restart    stop, then start.
      status     Task / Run entry, supervisor, and GET /health from Windows.
      logs       The supervisor's log and gsbd's log inside WSL (-Follow: keep printing).
      run        The supervisor itself (what the task runs): starts
                   wsl.exe -d <distro> --exec gsbd --listen tcp://127.0.0.1:<port> ...
                 in the foreground and starts it again whenever it exits (gsbd crash,
                 `wsl --shutdown`), with a growing pause when it keeps failing.

    Why a supervisor and not `gsbd --daemon`: WSL2 stops a distribution a few
    seconds after the last wsl.exe attached to it exits, daemons included.  A
    wsl.exe that lives as long as gsbd keeps the distribution (and so gsbd) up.
    -Daemon registers the plain `wsl -d <distro> -- gsbd --daemon` instead (for
    setups that keep WSL alive by other means, e.g. systemd units in the distro).

    Options (install saves them in %LOCALAPPDATA%\gsb\config.json; the other
    commands read them from there unless given again):
      -Distro NAME      WSL distribution (default: $env:GSB_WSL_DISTRO, else WSL's default)
      -Port N           TCP port on 127.0.0.1 (default 19876)
      -TokenFile PATH   token file (Windows or Linux path): gsbd requires the token
      -Device D         auto (default), cpu or cuda
      -DataDir DIR      gsbd's data directory inside WSL (default ~/.local/share/gsb)
      -Gsbd CMD         the gsbd command inside WSL (default gsbd, found through a
                        login shell's PATH, so `pip install --user` works)
      -Method Task|Run  how install registers the logon start (default Task)
      -Daemon           register `gsbd --daemon` instead of the supervisor
      -Lines N          logs: how many lines (default 50)
      -Follow           logs: keep printing new lines until Ctrl-C

.EXAMPLE
    powershell -ExecutionPolicy Bypass -File gsb-wsl.ps1 install -Distro Ubuntu-24.04
    gsb-wsl.ps1 status
    gsb-wsl.ps1 logs -Follow
#>
[CmdletBinding()]
param(
    [Parameter(Position = 0)]
    [ValidateSet('install', 'uninstall', 'start', 'stop', 'restart', 'status', 'logs', 'run', 'help')]
    [string]$Command = 'help',
    [string]$Distro,
    [int]$Port,
    [string]$TokenFile,
    [ValidateSet('', 'auto', 'cpu', 'cuda')]
    [string]$Device,
    [string]$DataDir,
    [string]$Gsbd,
    [ValidateSet('Task', 'Run')]
    [string]$Method,
    [switch]$Daemon,
    [int]$Lines = 50,
    [switch]$Follow
)

$ErrorActionPreference = 'Stop'
Set-StrictMode -Version 2.0

$TaskName = 'gsbd (WSL)'
$RunKey = 'HKCU:\Software\Microsoft\Windows\CurrentVersion\Run'
$RunValue = 'gsbd'
$StateDir = Join-Path $env:LOCALAPPDATA 'gsb'
$ConfigPath = Join-Path $StateDir 'config.json'
$SupLog = Join-Path $StateDir 'gsb-wsl.log'
$SupPid = Join-Path $StateDir 'gsb-wsl.pid'
$StopFlag = Join-Path $StateDir 'stop.flag'
$InstalledScript = Join-Path $StateDir 'gsb-wsl.ps1'

# ---- configuration -----------------------------------------------------------

function Get-Config {
    $cfg = @{ Distro = ''; Port = 19876; TokenFile = ''; Device = ''; DataDir = '';
              Gsbd = 'gsbd'; Method = 'Task'; Daemon = $false }
    if (Test-Path $ConfigPath) {
        $saved = Get-Content -Raw $ConfigPath | ConvertFrom-Json
        foreach ($p in $saved.PSObject.Properties) { $cfg[$p.Name] = $p.Value }
    }
    if ($env:GSB_WSL_DISTRO -and -not $cfg.Distro) { $cfg.Distro = $env:GSB_WSL_DISTRO }
    # options given now win over the saved ones
    if ($script:Distro) { $cfg.Distro = $script:Distro }
    if ($script:Port) { $cfg.Port = $script:Port }
    if ($script:TokenFile) { $cfg.TokenFile = $script:TokenFile }
    if ($script:Device) { $cfg.Device = $script:Device }
    if ($script:DataDir) { $cfg.DataDir = $script:DataDir }
    if ($script:Gsbd) { $cfg.Gsbd = $script:Gsbd }
    if ($script:Method) { $cfg.Method = $script:Method }
    if ($script:Daemon) { $cfg.Daemon = $true }
    if ($cfg.Port -lt 1 -or $cfg.Port -gt 65535) { throw "gsb-wsl: -Port must be 1..65535" }
    return $cfg
}

function Save-Config($cfg) {
    New-Item -ItemType Directory -Force -Path $StateDir | Out-Null
    ($cfg | ConvertTo-Json) | Set-Content -Encoding UTF8 $ConfigPath
}

function Write-Log([string]$msg) {
    New-Item -ItemType Directory -Force -Path $StateDir | Out-Null
    $line = '{0} {1}' -f (Get-Date -Format 'yyyy-MM-ddTHH:mm:ss'), $msg
    Add-Content -Encoding UTF8 -Path $SupLog -Value $line
    # keep the supervisor's own log small: one rotation at 1 MB
    if ((Get-Item $SupLog).Length -gt 1048576) { Move-Item -Force $SupLog "$SupLog.1" }
}

# One argument quoted for a Windows command line (the rules CommandLineToArgvW
# and the C runtime read back): backslashes before a quote are doubled.
function ConvertTo-WinArg([string]$a) {
    if ($a -ne '' -and $a -notmatch '[\s"]') { return $a }
    $out = '"'
    $bs = 0
    foreach ($ch in $a.ToCharArray()) {
        if ($ch -eq '\') { $bs++; continue }
        if ($ch -eq '"') { $out += ('\' * (2 * $bs + 1)) + '"' }
        else { $out += ('\' * $bs) + $ch }
        $bs = 0
    }
    return $out + ('\' * (2 * $bs)) + '"'
}

function Join-WinArgs([string[]]$list) {
    return ($list | ForEach-Object { ConvertTo-WinArg $_ }) -join ' '
}

function Get-DistroArgs($cfg) {
    if ($cfg.Distro) { return @('-d', $cfg.Distro) }
    return @()
}

# wsl.exe with arguments quoted by Join-WinArgs: PowerShell 5.1's own passing
# of arguments to programs mangles embedded double quotes, which the shell
# snippets below need.  -Capture returns stdout (else it goes to the console).
function Invoke-Wsl($cfg, [string[]]$wslArgs, [switch]$Capture) {
    $psi = New-Object System.Diagnostics.ProcessStartInfo
    $psi.FileName = 'wsl.exe'
    $psi.Arguments = Join-WinArgs (@(Get-DistroArgs $cfg) + $wslArgs)
    $psi.UseShellExecute = $false
    if ($Capture) {
        $psi.RedirectStandardOutput = $true
        $psi.StandardOutputEncoding = [System.Text.Encoding]::UTF8
    }
    $p = [System.Diagnostics.Process]::Start($psi)
    $out = $null
    if ($Capture) { $out = $p.StandardOutput.ReadToEnd() }
    $p.WaitForExit()
    return @{ Code = $p.ExitCode; Out = $out }
}

# A Windows path of the token file becomes the /mnt/c/... path gsbd reads.
function Convert-ToLinuxPath($cfg, [string]$path) {
    if (-not $path -or $path.StartsWith('/')) { return $path }
    $full = (Resolve-Path $path).Path
    $r = Invoke-Wsl $cfg @('--exec', 'wslpath', '-a', '-u', $full) -Capture
    if ($r.Code -ne 0 -or -not $r.Out) { throw "gsb-wsl: wslpath could not convert $full" }
    return $r.Out.Trim()
}

# gsbd's arguments inside WSL.
function Get-GsbdArgs($cfg) {
    $a = @('--listen', "tcp://127.0.0.1:$($cfg.Port)")
    if ($cfg.TokenFile) { $a += @('--token-file', $cfg.TokenFile) }
    if ($cfg.Device) { $a += @('--device', $cfg.Device) }
    if ($cfg.DataDir) { $a += @('--data-dir', $cfg.DataDir) }
    return $a
}

# wsl.exe's arguments: a login shell (so ~/.local/bin is on PATH) that records
# gsbd's pid for `stop`, then becomes gsbd.
function Get-WslArgs($cfg, [bool]$daemon) {
    $script = 'echo $$ >"/tmp/gsbd-wsl-$(id -u).pid"; exec "$0" "$@"'
    $g = Get-GsbdArgs $cfg
    if ($daemon) { $g += '--daemon' }
    return @('--exec', 'sh', '-lc', $script, $cfg.Gsbd) + $g
}

function Get-Health($cfg, [int]$timeoutMs = 2000) {
    # no proxy, whatever the system or HTTP_PROXY say: this is local traffic
    $req = [System.Net.HttpWebRequest]::Create("http://127.0.0.1:$($cfg.Port)/health")
    $req.Proxy = $null
    $req.Timeout = $timeoutMs
    try {
        $resp = $req.GetResponse()
        $reader = New-Object System.IO.StreamReader($resp.GetResponseStream())
        $body = $reader.ReadToEnd()
        $resp.Close()
        return $body | ConvertFrom-Json
    } catch {
        return $null
    }
}

function Wait-Health($cfg, [int]$seconds) {
    $deadline = (Get-Date).AddSeconds($seconds)
    while ((Get-Date) -lt $deadline) {
        $h = Get-Health $cfg 1000
        if ($h) { return $h }
        Start-Sleep -Milliseconds 300
    }
    return $null
}

function Get-SupervisorProcess {
    if (-not (Test-Path $SupPid)) { return $null }
    $id = [int](Get-Content $SupPid | Select-Object -First 1)
    $p = Get-Process -Id $id -ErrorAction SilentlyContinue
    # a stale pid file may name a process that has nothing to do with us
    if ($p -and $p.ProcessName -match '^(powershell|pwsh)$') { return $p }
    return $null
}

function Get-Task {
    return Get-ScheduledTask -TaskName $TaskName -ErrorAction SilentlyContinue
}

function Get-SupervisorArgs([string]$script) {
    return '-NoProfile -NonInteractive -WindowStyle Hidden -ExecutionPolicy Bypass -File ' +
           (ConvertTo-WinArg $script) + ' run'
}

# ---- commands ----------------------------------------------------------------

function Invoke-Run {
    $cfg = Get-Config
    New-Item -ItemType Directory -Force -Path $StateDir | Out-Null
    $running = Get-SupervisorProcess
    if ($running -and $running.Id -ne $PID) {
        Write-Log "supervisor already running (pid $($running.Id)); this one exits"
        return
    }
    Set-Content -Path $SupPid -Value $PID
    Remove-Item -Force -ErrorAction SilentlyContinue $StopFlag
    $argLine = Join-WinArgs (@(Get-DistroArgs $cfg) + (Get-WslArgs $cfg $false))
    $out = Join-Path $StateDir 'gsbd-wsl.out'
    $err = Join-Path $StateDir 'gsbd-wsl.err'
    $pause = 2
    Write-Log "supervisor started (pid $PID): wsl.exe $argLine"
    try {
        while (-not (Test-Path $StopFlag)) {
            $t0 = Get-Date
            $p = Start-Process -FilePath 'wsl.exe' -ArgumentList $argLine -NoNewWindow -PassThru `
                               -RedirectStandardOutput $out -RedirectStandardError $err
            $null = $p.Handle  # without it, ExitCode can read back empty after the exit
            $p.WaitForExit()
            $ran = ((Get-Date) - $t0).TotalSeconds
            $tail = ''
            foreach ($f in @($out, $err)) {
                if (Test-Path $f) { $tail += (Get-Content -Tail 5 $f) -join "`n" }
            }
            Write-Log ("gsbd exited with status {0} after {1:N0} s{2}" -f $p.ExitCode, $ran,
                       $(if ($tail) { ": $tail" } else { '' }))
            if (Test-Path $StopFlag) { break }
            # a gsbd that dies at once (bad option, port taken) is retried more slowly
            if ($ran -lt 10) { $pause = [Math]::Min($pause * 2, 60) } else { $pause = 2 }
            Write-Log "starting gsbd again in $pause s"
            Start-Sleep -Seconds $pause
        }
    } finally {
        Write-Log 'supervisor stopped'
        Remove-Item -Force -ErrorAction SilentlyContinue $SupPid
    }
}

function Invoke-Install {
    $cfg = Get-Config
    if ($cfg.TokenFile) { $cfg.TokenFile = Convert-ToLinuxPath $cfg $cfg.TokenFile }
    # gsbd must be there before anything is registered
    $r = Invoke-Wsl $cfg @('--exec', 'sh', '-lc', 'command -v "$0"', $cfg.Gsbd) -Capture
    $where = $r.Out
    if ($r.Code -ne 0) {
        throw ("gsb-wsl: '$($cfg.Gsbd)' is not on PATH inside WSL" +
               $(if ($cfg.Distro) { " ($($cfg.Distro))" } else { '' }) +
               ". Install gsb there first (pip install gsb, or build it), or pass -Gsbd /path/to/gsbd.")
    }
    Write-Host "gsbd in WSL: $where"
    Save-Config $cfg
    New-Item -ItemType Directory -Force -Path $StateDir | Out-Null
    Copy-Item -Force $PSCommandPath $InstalledScript  # the task must not depend on a Downloads folder
    if ($cfg.Daemon) {
        $exe = 'wsl.exe'
        $arg = Join-WinArgs (@(Get-DistroArgs $cfg) + (Get-WslArgs $cfg $true))
    } else {
        $exe = 'powershell.exe'
        $arg = Get-SupervisorArgs $InstalledScript
    }
    if ($cfg.Method -eq 'Run') {
        New-ItemProperty -Path $RunKey -Name $RunValue -Value "$exe $arg" -PropertyType String -Force | Out-Null
        Write-Host "registered: $RunKey\$RunValue = $exe $arg"
    } else {
        $action = New-ScheduledTaskAction -Execute $exe -Argument $arg
        $trigger = New-ScheduledTaskTrigger -AtLogOn -User "$env:USERDOMAIN\$env:USERNAME"
        # no time limit (the default stops a task after 72 h), on battery too, one instance
        $settings = New-ScheduledTaskSettingsSet -ExecutionTimeLimit ([TimeSpan]::Zero) `
            -AllowStartIfOnBatteries -DontStopIfGoingOnBatteries -StartWhenAvailable `
            -MultipleInstances IgnoreNew
        $principal = New-ScheduledTaskPrincipal -UserId "$env:USERDOMAIN\$env:USERNAME" `
            -LogonType Interactive -RunLevel Limited
        Register-ScheduledTask -TaskName $TaskName -Action $action -Trigger $trigger `
            -Settings $settings -Principal $principal -Force | Out-Null
        Write-Host "registered: scheduled task '$TaskName' at logon: $exe $arg"
    }
    Invoke-Start
}

function Invoke-Uninstall {
    Invoke-Stop
    if (Get-Task) {
        Unregister-ScheduledTask -TaskName $TaskName -Confirm:$false
        Write-Host "removed the scheduled task '$TaskName'"
    }
    if (Get-ItemProperty -Path $RunKey -Name $RunValue -ErrorAction SilentlyContinue) {
        Remove-ItemProperty -Path $RunKey -Name $RunValue
        Write-Host "removed $RunKey\$RunValue"
    }
    Remove-Item -Force -ErrorAction SilentlyContinue $InstalledScript
    Write-Host "kept: $ConfigPath and the logs in $StateDir"
}

function Invoke-Start {
    $cfg = Get-Config
    $h = Get-Health $cfg
    if ($h) {
        Write-Host "gsbd already answers on 127.0.0.1:$($cfg.Port) (version $($h.version), $($h.backend))"
        return
    }
    Remove-Item -Force -ErrorAction SilentlyContinue $StopFlag
    if (Get-Task) {
        Start-ScheduledTask -TaskName $TaskName
        Write-Host "started the scheduled task '$TaskName'"
    } elseif ($cfg.Daemon) {
        $r = Invoke-Wsl $cfg (Get-WslArgs $cfg $true)
        if ($r.Code -ne 0) { Write-Warning "gsbd --daemon failed (status $($r.Code))" }
    } else {
        $script = $InstalledScript
        if (-not (Test-Path $script)) { $script = $PSCommandPath }
        Start-Process -WindowStyle Hidden -FilePath 'powershell.exe' -ArgumentList (Get-SupervisorArgs $script)
        Write-Host 'started the supervisor'
    }
    $h = Wait-Health $cfg 60
    if ($h) {
        Write-Host "gsbd answers on http://127.0.0.1:$($cfg.Port)/health: version $($h.version), backend $($h.backend), device $($h.device)"
    } else {
        Write-Warning ("gsbd did not answer on 127.0.0.1:$($cfg.Port) within 60 s. " +
                       "See: gsb-wsl.ps1 logs   (and docs/TROUBLESHOOTING.md)")
        exit 1
    }
}

function Invoke-Stop {
    $cfg = Get-Config
    New-Item -ItemType Directory -Force -Path $StateDir | Out-Null
    Set-Content -Path $StopFlag -Value (Get-Date)  # the supervisor must not start it again
    # SIGTERM to the gsbd the supervisor started (its pid file), else to this user's gsbd
    $kill = 'f="/tmp/gsbd-wsl-$(id -u).pid"; p=$(cat "$f" 2>/dev/null); ' +
            'if [ -n "$p" ] && [ "$(cat /proc/$p/comm 2>/dev/null)" = gsbd ]; then kill -TERM "$p"; ' +
            'elif [ -f "${GSB_DATA_DIR:-$HOME/.local/share/gsb}/gsbd.pid" ]; then ' +
            'kill -TERM "$(cat "${GSB_DATA_DIR:-$HOME/.local/share/gsb}/gsbd.pid")"; fi; rm -f "$f"'
    $null = Invoke-Wsl $cfg @('--exec', 'sh', '-lc', $kill)
    $sup = Get-SupervisorProcess
    if ($sup) {
        if (-not $sup.WaitForExit(35000)) { Stop-Process -Id $sup.Id -Force }
    }
    if (Get-Task) { Stop-ScheduledTask -TaskName $TaskName -ErrorAction SilentlyContinue }
    $deadline = (Get-Date).AddSeconds(35)
    while ((Get-Health $cfg 500) -and (Get-Date) -lt $deadline) { Start-Sleep -Milliseconds 300 }
    if (Get-Health $cfg 500) {
        Write-Warning "something still answers on 127.0.0.1:$($cfg.Port) (a gsbd started another way?)"
    } else {
        Write-Host 'gsbd stopped'
    }
}

function Invoke-Status {
    $cfg = Get-Config
    $task = Get-Task
    if ($task) { Write-Host "scheduled task '$TaskName': $($task.State)" }
    else { Write-Host "scheduled task '$TaskName': not installed" }
    $run = Get-ItemProperty -Path $RunKey -Name $RunValue -ErrorAction SilentlyContinue
    if ($run) { Write-Host "Run entry: $($run.$RunValue)" }
    $sup = Get-SupervisorProcess
    if ($sup) { Write-Host "supervisor: running (pid $($sup.Id))" } else { Write-Host 'supervisor: not running' }
    $d = $(if ($cfg.Distro) { $cfg.Distro } else { '(default)' })
    Write-Host "distribution: $d   port: $($cfg.Port)   token: $(if ($cfg.TokenFile) { $cfg.TokenFile } else { 'none' })"
    $h = Get-Health $cfg
    if ($h) {
        Write-Host "health: $($h.status)  version $($h.version)  backend $($h.backend)  device $($h.device)  uptime $([int]$h.uptime_s) s"
        Write-Host "Python: set GSB_URL=tcp://127.0.0.1:$($cfg.Port)   (or gsb.connect(`"tcp://127.0.0.1:$($cfg.Port)`"))"
    } else {
        Write-Host "health: nothing answers on http://127.0.0.1:$($cfg.Port)/health"
        exit 3
    }
}

function Invoke-Logs {
    $cfg = Get-Config
    if (Test-Path $SupLog) {
        Write-Host "== $SupLog (the supervisor)"
        Get-Content -Tail ([Math]::Min($Lines, 20)) $SupLog
    }
    $dir = $(if ($cfg.DataDir) { $cfg.DataDir } else { '${GSB_DATA_DIR:-$HOME/.local/share/gsb}' })
    $file = "$dir/gsbd.log"
    Write-Host "== $file (gsbd, inside WSL)"
    $tailArgs = "-n $([int]$Lines)" + $(if ($Follow) { ' -F' } else { '' })
    $null = Invoke-Wsl $cfg @('--exec', 'sh', '-lc', "exec tail $tailArgs `"$file`"")
}

switch ($Command) {
    'install'   { Invoke-Install }
    'uninstall' { Invoke-Uninstall }
    'start'     { Invoke-Start }
    'stop'      { Invoke-Stop }
    'restart'   { Invoke-Stop; Invoke-Start }
    'status'    { Invoke-Status }
    'logs'      { Invoke-Logs }
    'run'       { Invoke-Run }
    default     { Get-Help $PSCommandPath -Detailed }
}
