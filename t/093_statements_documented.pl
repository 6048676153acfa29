# doc/statements.md lists every statement the extension sends to SQL
# Server (issue 12).  This test keeps that list honest without a server: it
# reads the C string literals of src/*.c and include/*.h, takes the T-SQL
# among them, and requires every object, procedure, built-in function and
# SET option they use to be named in doc/statements.md, the ones of sent
# statements inside a code block (a statement's shape).  Objects that only
# messages name (hints such as "EXEC sys.sp_cdc_enable_table ...") must be
# named too, so the page can say the worker never runs them.  Conversely a
# sys./cdc. object in a code block of the page that no source file uses any
# more is a stale entry.
use strict;
use warnings;

use FindBin;
use Test::More;

my $root = "$FindBin::RealBin/..";
my $doc_path = "$root/doc/statements.md";

# ---- the C side ---------------------------------------------------------

# Groups of adjacent string literals ("a" "b" is one string in C), with the
# file and line of their first part.  Comments and character literals are
# skipped; a backslash-newline between literals (a macro) is whitespace.
sub literal_groups
{
	my ($path) = @_;
	open my $fh, '<', $path or die "$path: $!";
	local $/;
	my $src = <$fh>;
	close $fh;

	my @groups;
	my $current;
	my $pos = 0;
	my $len = length $src;
	pos($src) = 0;
	while (pos($src) < $len)
	{
		if ($src =~ /\G\/\*.*?\*\//gcs || $src =~ /\G\/\/[^\n]*/gc)
		{
			next;
		}
		if ($src =~ /\G"((?:[^"\\\n]|\\.)*)"/gc)
		{
			my $text = $1;
			if ($current)
			{
				$current->{text} .= $text;
			}
			else
			{
				my $line = 1 + (substr($src, 0, pos($src)) =~ tr/\n//);
				$current = { text => $text, where => "$path:$line" };
				push @groups, $current;
			}
			next;
		}
		if ($src =~ /\G(?:\s|\\\n)+/gc)
		{
			next;				# whitespace keeps a group open
		}
		if ($src =~ /\G'(?:[^'\\\n]|\\.)*'/gc)
		{
			undef $current;
			next;
		}
		$src =~ /\G[A-Za-z_][A-Za-z0-9_]*|\G./gcs;
		undef $current;
	}
	return @groups;
}

# T-SQL the extension sends, as opposed to a message or hint that names an
# object: the text starts with a statement keyword.  Postgres statements
# (SPI) name mssql_cdc./pg_catalog. objects or take $n parameters.
my $sql_start = qr/^(?:\s|;|\(|%s|,)*
	(?:(?:SELECT|EXEC|SET|BEGIN|COMMIT|PRINT|FROM|WHERE|LEFT|JOIN|ORDER|AND|CASE|WHEN|ELSE)\b(?!\))
	  |[A-Z][A-Z0-9_]*\(
	  |\.[A-Za-z]+\(\)
	  |(?:sys|cdc)\.[A-Za-z_]+\()/x;

sub is_tsql
{
	my ($text) = @_;
	return 0 if $text =~ /\b(?:mssql_cdc|pg_catalog)\.|\$\d/;
	return 1 if $text =~ /^[A-Za-z_]*%s[A-Za-z_]*$/ && $text ne '%s';	# a name made from one
	return $text =~ $sql_start;
}

# word -> first place it appears
my (%sent, %named);

sub note_token
{
	my ($map, $token, $where) = @_;
	$map->{$token} //= $where;
}

my @not_functions = qw(TOP IN AS AND OR NOT ON FROM WHERE SELECT WITH VALUES EXISTS OVER);
my %not_function = map { $_ => 1 } @not_functions;

for my $path (sort(glob("$root/src/*.c"), glob("$root/include/*.h")))
{
	(my $short = $path) =~ s{^\Q$root\E/}{};
	for my $g (literal_groups($path))
	{
		my $text = $g->{text};
		$text =~ s/\\[ntr]/ /g;			# C escapes are whitespace to T-SQL
		(my $where = $g->{where}) =~ s{^\Q$root\E/}{};
		my $sql = is_tsql($text);
		my $map = $sql ? \%sent : \%named;

		# catalog objects, CDC functions and procedures
		note_token($map, $1, $where)
		  while $text =~ /\b((?:sys|cdc|INFORMATION_SCHEMA)\.[A-Za-z_][A-Za-z0-9_]*)/g;
		next unless $sql;

		# change tables and change functions are named after their instance
		note_token(\%sent, $1, $where) while $text =~ /\b([A-Za-z_]+_)%s/g;
		note_token(\%sent, $1, $where) while $text =~ /%s(_[A-Za-z]+)\b/g;
		# procedures without schema (sp_pkeys)
		note_token(\%sent, $1, $where) while $text =~ /\bEXEC\s+([A-Za-z_][A-Za-z0-9_.]*)/g;
		# built-in functions, @@ functions, spatial methods
		while ($text =~ /\b([A-Z][A-Z0-9_]*[A-Z0-9])\s*\(/g)
		{
			note_token(\%sent, "$1(", $where) unless $not_function{$1};
		}
		note_token(\%sent, $1, $where) while $text =~ /(@@[A-Z]+)/g;
		note_token(\%sent, $1, $where) while $text =~ /\.([A-Z][A-Za-z]+)\(/g;
		# session options and statements
		while ($text =~ /\b(SET (?:[A-Z_]+)(?: (?!ON\b|OFF\b)[A-Z_]+)*)/g)
		{
			note_token(\%sent, $1, $where);
		}
		note_token(\%sent, $1, $where)
		  while $text =~ /\b(AT TIME ZONE|WITH \(NOLOCK\)|BEGIN TRANSACTION|COMMIT TRANSACTION|PRINT|COLLATE)(?![A-Za-z0-9_])/g;
	}
}

# ---- the documentation --------------------------------------------------

ok(-f $doc_path, 'doc/statements.md exists') or BAIL_OUT('no doc/statements.md');
open my $dh, '<', $doc_path or die "$doc_path: $!";
my $doc = do { local $/; <$dh> };
close $dh;

my $code = '';
$code .= "$1\n" while $doc =~ /^```[a-z]*\n(.*?)^```/msg;

cmp_ok(scalar(keys %sent), '>=', 30, 'the source has T-SQL statements to check')
  or diag('the literal scanner found almost nothing: is it broken?');

note('sent: ' . join(' ', sort keys %sent));
note('named only: ' . join(' ', grep { !exists $sent{$_} } sort keys %named));

my @missing_code = grep { index($code, $_) < 0 } sort keys %sent;
is_deeply(\@missing_code, [],
	'every object, function and option of a sent statement is in a code block of doc/statements.md')
  or diag(join "\n", map { "  $_ (first sent at $sent{$_})" } @missing_code);

my @missing_named = grep { !exists $sent{$_} && index($doc, $_) < 0 } sort keys %named;
is_deeply(\@missing_named, [], 'every object that a message names is mentioned in doc/statements.md')
  or diag(join "\n", map { "  $_ (named at $named{$_})" } @missing_named);

# stale entries: a sys./cdc. object in a shape that no source file uses
my %in_source = (%sent, %named);
my %stale;
$stale{$1} = 1 while $code =~ /\b((?:sys|cdc|INFORMATION_SCHEMA)\.[A-Za-z_][A-Za-z0-9_]*)/g;
my @stale = grep { !exists $in_source{$_} } sort keys %stale;
is_deeply(\@stale, [], 'doc/statements.md shows no statement on an object the source does not use')
  or diag(join "\n", map { "  $_" } @stale);

# the page is where the README and the setup guide send readers
for my $from ('README.md', 'doc/sql-server-setup.md')
{
	open my $fh, '<', "$root/$from" or die "$root/$from: $!";
	my $text = do { local $/; <$fh> };
	close $fh;
	ok($text =~ /\]\((?:doc\/)?statements\.md[)#]/, "$from links doc/statements.md");
}

# every Microsoft page the list cites is a Learn page of SQL Server
my @urls = $doc =~ m{(https://learn\.microsoft\.com/\S+?)[)\s>]}g;
cmp_ok(scalar(@urls), '>=', 30, 'doc/statements.md cites the Microsoft pages');

done_testing();
